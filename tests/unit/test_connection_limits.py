"""max.connections.per.ip.overrides parsed and checked as Kafka does, at start-up and in the
admin APIs, and the connection limits handed to the core (resolved, live)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from krust.config.broker import load_config
from krust.config.checks import parse_overrides
from krust.config.errors import ConfigError
from krust.controller.configs import ConfigAdmin, OpType, ResourceType
from krust.controller.controller import Controller

from .conftest import FakeCore, LoopRunner
from .test_config_admin import incremental
from .test_controller import make_config


def test_overrides_are_host_count_pairs_split_at_the_last_colon() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("10.0.0.1:5, localhost:7,::1:2") == {
        "10.0.0.1": 5,
        "localhost": 7,
        "::1": 2,
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("10.0.0.1", "Error parsing configuration property"),
        ("10.0.0.1:x", 'For input string: "x"'),
        ("bad/host:1", "contains invalid addresses : bad/host"),
    ],
)
def test_bad_overrides_stop_start_up_naming_the_key(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {}, [f"log.dirs={tmp_path}", f"max.connections.per.ip.overrides={text}"])
    assert caught.value.key == "max.connections.per.ip.overrides"
    assert reason in str(caught.value)


def test_zero_connections_per_ip_needs_overrides(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        load_config(None, {}, [f"log.dirs={tmp_path}", "max.connections.per.ip=0"])
    load_config(
        None,
        {},
        [
            f"log.dirs={tmp_path}",
            "max.connections.per.ip=0",
            "max.connections.per.ip.overrides=127.0.0.1:3",
        ],
    )


def test_the_limits_reach_the_core_at_start_and_when_altered(
    tmp_path: Path, fake_core: FakeCore, run: LoopRunner
) -> None:
    controller = Controller.open(
        make_config([tmp_path], "max.connections.per.ip.overrides=localhost:3"), fake_core
    )
    assert fake_core.connection_limits is not None
    assert fake_core.connection_limits[2] in ({"127.0.0.1": 3}, {"::1": 3})
    admin = ConfigAdmin(controller)
    change = ("max.connections.per.ip.overrides", "10.0.0.9:4", OpType.SET)
    assert incremental(run, admin, ResourceType.BROKER, "", change)[0] == ErrorCode.none
    assert fake_core.connection_limits[2] == {"10.0.0.9": 4}
    bad = ("max.connections.per.ip.overrides", "a b:1", OpType.SET)
    error, message = incremental(run, admin, ResourceType.BROKER, "", bad)
    assert error == ErrorCode.invalid_request
    assert message is not None and "contains invalid addresses : a b" in message


def test_zero_connections_per_ip_is_refused_at_run_time_without_overrides(
    tmp_path: Path, fake_core: FakeCore, run: LoopRunner
) -> None:
    admin = ConfigAdmin(Controller.open(make_config([tmp_path]), fake_core))
    zero = ("max.connections.per.ip", "0", OpType.SET)
    error, message = incremental(run, admin, ResourceType.BROKER, "", zero)
    assert error == ErrorCode.invalid_request
    assert message is not None and "can be set to zero only if" in message
    overrides = ("max.connections.per.ip.overrides", "127.0.0.1:5", OpType.SET)
    assert incremental(run, admin, ResourceType.BROKER, "", zero, overrides)[0] == ErrorCode.none
    assert fake_core.connection_limits is not None
    assert fake_core.connection_limits[1:3] == (0, {"127.0.0.1": 5})
