"""Broker keys that had no test showing they act (see the walk in test_no_silent_settings.py)."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode
from krust.controller.controller import Controller

from .conftest import FakeCore, LoopRunner
from .test_controller import create, make_config, topic


def test_broker_rack_is_registered_and_reported(tmp_path: Path, fake_core: FakeCore) -> None:
    controller = Controller.open(make_config([tmp_path], "broker.rack=rack-a"), fake_core)
    assert controller.image.brokers[1].rack == "rack-a"
    assert [b["rack"] for b in fake_core.last_image["brokers"]] == ["rack-a"]


def test_default_replication_factor_applies_to_topics_created_without_one(
    run: LoopRunner, tmp_path: Path, fake_core: FakeCore
) -> None:
    controller = Controller.open(make_config([tmp_path], "default.replication.factor=2"), fake_core)
    (result,) = create(run, controller, topic("t", 1, -1)).topics
    # One broker cannot hold two replicas: the default was used.
    assert result.error_code is ErrorCode.invalid_replication_factor
