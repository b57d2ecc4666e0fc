"""One member of a classic group: identity, timeouts, protocols, assignment, parked requests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from krust.group.results import JoinGroupResult, SyncGroupResult

Protocols = tuple[tuple[str, bytes], ...]
"""(protocol name, metadata) pairs in the member's order of preference."""


@dataclass(eq=False)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    # A JoinGroup/SyncGroup response parked until the rebalance gets far enough to answer it.
    join_future: asyncio.Future[JoinGroupResult] | None = field(default=None, repr=False)
    sync_future: asyncio.Future[SyncGroupResult] | None = field(default=None, repr=False)
    # Joined but not yet through a completed join phase: such a member cannot heartbeat yet, so
    # its expiry is not excused by a parked JoinGroup (Kafka's isNew).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols, same metadata, same preference order (a rejoin that changes nothing)."""
        return tuple(protocols) == self.protocols

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session expiry spares this member: a parked request counts as liveness."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def complete_join(self, result: JoinGroupResult) -> bool:
        future, self.join_future = self.join_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def complete_sync(self, result: SyncGroupResult) -> bool:
        future, self.sync_future = self.sync_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True
