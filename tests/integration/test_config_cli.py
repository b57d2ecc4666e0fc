"""krust-broker's configuration as an operator meets it: errors, precedence, defaults."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .broker_process import broker_command, broker_environment, free_port
from .clients.confluent import partition_count

CONFIG_ERROR_EXIT = 2
CLI_TIMEOUT_S = 30


def run_broker_cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run krust-broker expecting it to refuse to start; it listens on a free port if it doesn't."""
    listener = f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"
    return subprocess.run(
        [broker_command(), "--override", listener, *args],
        cwd=cwd,
        env=broker_environment(env or {}),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def assert_config_error_naming(result: subprocess.CompletedProcess[str], name: str) -> None:
    assert result.returncode == CONFIG_ERROR_EXIT, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert name in lines[0]


def test_unknown_key_in_override(tmp_path: Path) -> None:
    result = run_broker_cli(["--override", "log.dirz=/tmp/typo"], tmp_path)

    assert_config_error_naming(result, "log.dirz")


def test_unknown_key_in_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=2\nnum.partitionz=3\n")

    result = run_broker_cli(["--config", str(config)], tmp_path)

    assert_config_error_naming(result, "num.partitionz")


def test_unknown_krust_environment_variable(tmp_path: Path) -> None:
    result = run_broker_cli([], tmp_path, env={"KRUST_NUM_PARTITIONZ": "3"})

    assert_config_error_naming(result, "KRUST_NUM_PARTITIONZ")


@pytest.mark.parametrize(
    "override",
    [
        "num.partitions=three",
        "num.partitions=0",
        "auto.create.topics.enable=maybe",
        # Kafka 4's smallest segment is 1 MiB (KIP-1030).
        "log.segment.bytes=1048575",
        # Within Kafka's bound (4) but not the core's: an index holds one 12-byte entry.
        "log.index.size.max.bytes=8",
    ],
)
def test_bad_value(tmp_path: Path, override: str) -> None:
    result = run_broker_cli(["--override", override], tmp_path)

    assert_config_error_naming(result, override.split("=")[0])


def test_log_dirs_that_is_a_file(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "data-file"
    not_a_dir.write_text("I am a file")

    result = run_broker_cli(["--override", f"log.dirs={not_a_dir}"], tmp_path)

    assert_config_error_naming(result, str(not_a_dir))
    assert not_a_dir.read_text() == "I am a file"


@pytest.mark.parametrize(
    ("from_env", "from_override", "expected"),
    [(None, None, 2), ("3", None, 3), ("3", "4", 4)],
    ids=["file", "env-over-file", "override-over-env"],
)
def test_config_file_then_env_then_override(
    broker_factory, tmp_path: Path, from_env: str | None, from_override: str | None, expected: int
) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# auto-created topics get num.partitions partitions\nnum.partitions=2\n")
    env = {"KRUST_NUM_PARTITIONS": from_env} if from_env else {}
    overrides = {"num.partitions": from_override} if from_override else {}
    broker = broker_factory(overrides, env=env, config_file=config)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 30_000})
    producer.produce("auto-created", value=b"creates the topic")
    assert producer.flush(40) == 0

    assert partition_count(broker.bootstrap, "auto-created") == expected


def test_without_configuration_data_goes_to_krust_data_in_the_working_dir(broker_factory) -> None:
    broker = broker_factory({"log.dirs": None})

    assert "krust-data" in broker.startup_line()
    assert broker.data_dir == broker.workdir / "krust-data"
    assert broker.data_dir.is_dir()
    broker.stop()


def test_a_taken_port_fails_without_saying_it_listens(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_broker_cli(["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"], tmp_path)

    assert result.returncode == 1, result.stderr
    assert "listening on" not in result.stdout
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
