"""What the coordinator reads from the controller: the shape of krust.controller's image.

Structural types, so the coordinator depends on the documented contract (docs/python-services.md)
rather than on the controller package, and unit tests can hand it plain fakes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol


class BrokerView(Protocol):
    @property
    def node_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    def address_for(self, listener: str) -> tuple[str, int]: ...


class PartitionView(Protocol):
    @property
    def leader(self) -> int: ...


class TopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Mapping[int, PartitionView]: ...


class ImageView(Protocol):
    @property
    def node_id(self) -> int: ...
    @property
    def brokers(self) -> Mapping[int, BrokerView]: ...
    @property
    def topics(self) -> Mapping[str, TopicView]: ...
    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicView]: ...
    @property
    def group_configs(self) -> Mapping[str, Mapping[str, str]]:
        """Dynamic group configs by group id (kafka-configs --entity-type groups)."""
        ...

    @property
    def features(self) -> Mapping[str, int]:
        """Finalized feature levels (group.version gates KIP-848's consumer groups)."""
        ...


class ControllerView(Protocol):
    @property
    def image(self) -> ImageView: ...

    def on_metadata_change(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the running event loop after each metadata change."""

    async def ensure_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        internal: bool = False,
    ) -> Any: ...
