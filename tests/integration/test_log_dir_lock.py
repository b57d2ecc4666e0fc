"""Two brokers on one log dir: the second is refused (exit 2, one line naming the dir), as
Kafka refuses with its `.lock` file, and the first keeps serving."""

from __future__ import annotations

from pathlib import Path

from .broker_process import BrokerProcess
from .clients import CLIENTS_BY_NAME, consume_all, produce_samples
from .clients.confluent import create_topic
from .records import assert_read_back
from .test_config_cli import assert_config_error_naming, run_broker_cli

confluent = CLIENTS_BY_NAME["confluent-kafka"]


def test_a_second_broker_on_the_same_log_dir_exits_2_and_the_first_keeps_serving(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "locked")
    before = produce_samples(confluent, broker.bootstrap, "locked", count=5, codec="gzip")

    second = run_broker_cli(["--override", f"log.dirs={broker.data_dir}"], tmp_path)

    assert_config_error_naming(second, str(broker.data_dir))
    assert "in use by another process" in second.stderr
    assert broker.unexpected_exit() is None
    after = produce_samples(confluent, broker.bootstrap, "locked", count=5, codec="gzip")
    consumed = consume_all(confluent, broker.bootstrap, "locked", 10)
    assert_read_back(before, consumed[:5])
    assert_read_back(after, consumed[5:], base_offset=5)
