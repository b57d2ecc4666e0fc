"""Which partitions of a coordinator's internal topic this broker serves, and their loading.

The leader of a partition is the coordinator of every key that maps to it. A partition this
broker comes to lead is LOADING while its records are replayed, then ACTIVE; one another broker
comes to lead is unloaded. Until ACTIVE, requests for its keys are answered
COORDINATOR_LOAD_IN_PROGRESS by the coordinator (Kafka's CoordinatorRuntime does the same).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger(__name__)

Install = Callable[[], None]
"""Puts a loaded partition's state in place; runs only if the partition is still loading."""


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


class CoordinatorPartitions:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        load: Callable[[int], Awaitable[Install]],
        unload: Callable[[int], None],
    ) -> None:
        self._loop = loop
        self._topic = topic
        self._load_partition = load
        self._unload_partition = unload
        self._states: dict[int, PartitionState] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}

    def state(self, partition: int) -> PartitionState | None:
        return self._states.get(partition)

    def is_active(self, partition: int) -> bool:
        return self._states.get(partition) is PartitionState.ACTIVE

    def any_loading(self) -> bool:
        return PartitionState.LOADING in self._states.values()

    def is_known(self, partition: int) -> bool:
        return partition in self._states

    def sync(self, leaders: Mapping[int, int], node_id: int) -> None:
        """Load newly led partitions, unload the ones another broker now leads."""
        for partition, leader in leaders.items():
            if leader == node_id:
                if partition not in self._states:
                    self.start_loading(partition)
            elif partition in self._states:
                self.unload(partition)

    def start_loading(self, partition: int) -> None:
        self._states[partition] = PartitionState.LOADING
        self._loads[partition] = self._loop.create_task(self._load(partition))

    async def _load(self, partition: int) -> None:
        try:
            install = await self._load_partition(partition)
        except Exception:
            log.exception("%s-%d: loading failed; will retry on demand", self._topic, partition)
            self._states.pop(partition, None)
            return
        finally:
            self._loads.pop(partition, None)
        if self._states.get(partition) is not PartitionState.LOADING:
            return  # unloaded meanwhile
        install()
        self._states[partition] = PartitionState.ACTIVE

    def unload(self, partition: int) -> None:
        self._states.pop(partition, None)
        load = self._loads.pop(partition, None)
        if load is not None:
            load.cancel()
        self._unload_partition(partition)

    def loads(self) -> list[asyncio.Task[None]]:
        return list(self._loads.values())

    async def wait_loaded(self) -> None:
        """Wait for the loads under way (start-up, tests)."""
        while self._loads:
            await asyncio.gather(*self._loads.values(), return_exceptions=True)

    def close(self) -> None:
        for load in self._loads.values():
            load.cancel()
