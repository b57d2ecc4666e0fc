"""The broker side of the lifecycle: registration, heartbeats, controlled shutdown."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from krust.bridge.protocol import build_entity, encode_entity
from krust.runtime.lifecycle_manager import (
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    BrokerLifecycleManager,
)

from .conftest import LoopRunner
from .test_controller import make_config


class FakeController:
    """Answers registrations with increasing epochs and heartbeats as told."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, Any]] = []
        self.next_epoch = 42
        self.stale_once = False
        self.shut_down_after = 2
        self.refusals: list[int] = []

    def set_broker_epoch(self, epoch: int) -> None:
        self.epoch_in_core = epoch

    def send_to_controller(self, api_key: int, version: int, body: bytes) -> bytes:
        request, _ = entity_reader(load_request_schema(api_key, version))(body, 0)
        self.requests.append((api_key, request))
        if api_key == BROKER_REGISTRATION and self.refusals:
            fields: dict[str, Any] = {"error_code": self.refusals.pop(0)}
        elif api_key == BROKER_REGISTRATION:
            fields = {"broker_epoch": self.next_epoch}
            self.next_epoch += 1
        elif self.stale_once:
            self.stale_once = False
            fields = {"error_code": 77}  # STALE_BROKER_EPOCH
        else:
            asked = [r for k, r in self.requests if k == BROKER_HEARTBEAT and r.want_shut_down]
            fields = {
                "is_fenced": False,
                "should_shut_down": len(asked) >= self.shut_down_after,
            }
        return encode_entity(build_entity(load_response_schema(api_key, version), fields))


def heartbeats(controller: FakeController) -> list[Any]:
    return [r for k, r in controller.requests if k == BROKER_HEARTBEAT]


def test_registers_then_heartbeats_with_the_applied_offset(run: LoopRunner, tmp_path: Path) -> None:
    config = make_config([tmp_path], "broker.heartbeat.interval.ms=10", "broker.rack=r1")
    controller, offset = FakeController(), [7]
    manager = BrokerLifecycleManager(config, "cluster-id", controller, lambda: offset[0])

    async def scenario() -> None:
        manager.start()
        while len(heartbeats(controller)) < 2:
            await asyncio.sleep(0.01)
        offset[0] = 9
        controller.stale_once = True
        while manager.broker_epoch != 43 or heartbeats(controller)[-1].broker_epoch != 43:
            await asyncio.sleep(0.01)
        await manager.close()

    run(asyncio.wait_for(scenario(), 10))
    kinds = [k for k, _ in controller.requests]
    registration = controller.requests[0][1]
    assert kinds[0] == BROKER_REGISTRATION and registration.broker_id == 1
    assert registration.rack == "r1" and registration.cluster_id == "cluster-id"
    assert [(h.port, h.name) for h in registration.listeners] == [(19092, "PLAINTEXT")]
    first, *_ = heartbeats(controller)
    assert (first.broker_epoch, first.current_metadata_offset) == (42, 7)
    # STALE_BROKER_EPOCH: registered again, as the same incarnation.
    again = [r for k, r in controller.requests if k == BROKER_REGISTRATION][1]
    assert again.incarnation_id == registration.incarnation_id
    assert heartbeats(controller)[-1].current_metadata_offset == 9
    assert not manager.fenced
    assert controller.epoch_in_core == 43, "AlterPartition requests carry the new epoch"
    # Controlled shutdown: want_shut_down until the controller says so.
    asking = [h for h in heartbeats(controller) if h.want_shut_down]
    assert len(asking) == controller.shut_down_after


def test_a_duplicate_node_id_is_logged_as_an_error_naming_it_and_retried(
    run: LoopRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config([tmp_path], "broker.heartbeat.interval.ms=10")
    controller = FakeController()
    controller.refusals = [101, 101]  # DUPLICATE_BROKER_REGISTRATION: broker 1 is alive
    manager = BrokerLifecycleManager(config, "cluster-id", controller, lambda: 0)

    async def scenario() -> None:
        manager.start()
        while manager.broker_epoch < 0:  # the other broker 1 went away
            await asyncio.sleep(0.01)
        await manager.close()

    with caplog.at_level(logging.WARNING, logger="krust.runtime.lifecycle_manager"):
        run(asyncio.wait_for(scenario(), 10))
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "once, not at every retry"
    assert "DUPLICATE_BROKER_REGISTRATION" in errors[0] and "node.id 1" in errors[0]
    assert manager.broker_epoch == 42
