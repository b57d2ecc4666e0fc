"""Driving KIP-848 consumer groups in unit tests: a coordinator over fakes, with heartbeats in
the shape the Java consumer sends them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from krust.group.consumer.heartbeat_request import HeartbeatRequest, HeartbeatResult
from krust.group.coordinator import GroupCoordinator

from .clock import FakeClock
from .group import FakeController, FakeCore, fast_config, start_coordinator


class ConsumerGroupDriver:
    """A coordinator with topics, and heartbeats in the shape of the Java consumer's."""

    def __init__(self, coordinator: GroupCoordinator, controller: FakeController) -> None:
        self.coordinator = coordinator
        self.controller = controller

    def topic_id(self, name: str) -> uuid.UUID:
        return self.controller.image.topics[name].topic_id

    def partitions(self, result: HeartbeatResult) -> dict[str, set[int]] | None:
        if result.assignment is None:
            return None
        names = {t.topic_id: name for name, t in self.controller.image.topics.items()}
        return {names[t]: set(p) for t, p in result.assignment.items()}

    async def heartbeat(
        self,
        member_id: str,
        epoch: int,
        *,
        topics: Sequence[str] | None = None,
        regex: str | None = None,
        owned: dict[str, Sequence[int]] | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
        group_id: str = "group",
        rebalance_timeout_ms: int = -1,
    ) -> HeartbeatResult:
        joining = epoch == 0
        return await self.coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=group_id,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rebalance_timeout_ms=(
                    rebalance_timeout_ms
                    if rebalance_timeout_ms != -1
                    else 300_000
                    if joining
                    else -1
                ),
                subscribed_topic_names=tuple(topics) if topics is not None else None,
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                owned=(
                    []
                    if joining
                    else None
                    if owned is None
                    else [(self.topic_id(t), list(p)) for t, p in owned.items()]
                ),
                client_id="client",
                client_host="/127.0.0.1",
            )
        )


async def new_group(
    clock: FakeClock | None = None, core: FakeCore | None = None, **config: Any
) -> ConsumerGroupDriver:
    controller = FakeController()
    controller.add_topic("t", 4)
    coordinator = await start_coordinator(
        fast_config(**config),
        core,
        controller,
        clock or FakeClock(),
    )
    return ConsumerGroupDriver(coordinator, controller)
