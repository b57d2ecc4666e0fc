"""Rebalance: how long a group of consumers takes to absorb one member joining and one leaving.

A group of `members` confluent-kafka consumers (one thread each, one librdkafka instance each)
reads a topic while a producer writes a steady trickle to every partition, each record carrying
its send time from this process's monotonic clock. A change (a member's subscribe(), or a
member's close()) is absorbed when every partition is owned by exactly one member of the new
group, every member owns at least one, and every partition has delivered to its current owner,
while that member owned it, a record produced after the change began: the group is consuming
again, not just assigned.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from brokers import GROUP_COORDINATOR
from confluent_kafka import Consumer, Producer, TopicPartition

_TIMESTAMP = struct.Struct(">d")
# How often the absorbed condition is checked: well under the heartbeat interval, so the
# check's own granularity is not what is measured.
_CHECK_INTERVAL_S = 0.005
_POLL_TIMEOUT_S = 0.05
# Covers librdkafka's coordinator look-up and its retry after a lost first request.
_CLIENT_START_S = 1.0
_HEARTBEAT_MS = GROUP_COORDINATOR["group.consumer.heartbeat.interval.ms"]
_HEARTBEAT_S = int(_HEARTBEAT_MS) / 1000

# The client side of each protocol. Classic members heartbeat as often as the brokers tell
# KIP-848 members to (group.consumer.heartbeat.interval.ms, brokers.GROUP_COORDINATOR): a
# classic member learns of a rebalance from its next heartbeat, a KIP-848 member of its new
# assignment, so equal intervals keep the protocols comparable.
PROTOCOLS: dict[str, dict[str, str]] = {
    "classic eager (range)": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "heartbeat.interval.ms": _HEARTBEAT_MS,
    },
    "classic cooperative (cooperative-sticky)": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
        "heartbeat.interval.ms": _HEARTBEAT_MS,
    },
    # KIP-848: the broker assigns (its default assignor, uniform) and sets the heartbeat
    # interval; librdkafka refuses the classic settings with this protocol.
    "KIP-848 (group.protocol=consumer)": {"group.protocol": "consumer"},
}


def absorbed(
    owned: Mapping[str, Collection[int]],
    fresh: Mapping[str, Collection[int]],
    members: Collection[str],
    partitions: int,
) -> bool:
    """True when each of `partitions` is owned (`owned`: member -> its partitions) by exactly
    one of `members`, each of `members` owns at least one, and each partition is in its
    owner's `fresh` (delivered a record produced since the change began while owned)."""
    owner: dict[int, str] = {}
    for member, held in owned.items():
        for partition in held:
            if partition in owner:
                return False
            owner[partition] = member
    if set(owner) != set(range(partitions)):
        return False
    if any(not owned.get(member) for member in members):
        return False
    return all(
        member in members and partition in fresh.get(member, ())
        for partition, member in owner.items()
    )


@dataclass
class _Ownership:
    """What every member owns and has consumed since the current change began."""

    partitions: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    owned: dict[str, set[int]] = field(default_factory=dict)
    fresh: dict[str, set[int]] = field(default_factory=dict)
    since: float = 0.0
    begun: threading.Event = field(default_factory=threading.Event)

    def begin(self) -> None:
        with self.lock:
            self.since = time.monotonic()
            for consumed in self.fresh.values():
                consumed.clear()
        self.begun.set()

    def assigned(self, member: str, partitions: Iterable[int]) -> None:
        with self.lock:
            self.owned.setdefault(member, set()).update(partitions)

    def revoked(self, member: str, partitions: Iterable[int]) -> None:
        with self.lock:
            for partition in partitions:
                self.owned.get(member, set()).discard(partition)
                self.fresh.get(member, set()).discard(partition)

    def delivered(self, member: str, partition: int, produced_at: float) -> None:
        with self.lock:
            if produced_at >= self.since and partition in self.owned.get(member, ()):
                self.fresh.setdefault(member, set()).add(partition)

    def left(self, member: str) -> None:
        with self.lock:
            self.owned.pop(member, None)
            self.fresh.pop(member, None)

    def wait_until_absorbed(self, members: Collection[str], timeout_s: float) -> float:
        """Seconds from the change's begin() until the group absorbed it."""
        if not self.begun.wait(timeout_s):
            raise TimeoutError("the change never began")
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if absorbed(self.owned, self.fresh, members, self.partitions):
                    return time.monotonic() - self.since
                state = {member: sorted(held) for member, held in self.owned.items()}
            if time.monotonic() > deadline:
                raise TimeoutError(f"not absorbed after {timeout_s:.0f} s; owned: {state}")
            time.sleep(_CHECK_INTERVAL_S)


class _Member(threading.Thread):
    """One consumer in its own thread. Given `change_at` (a monotonic instant), it subscribes
    then, beginning a change; `leave(at)` makes it close at `at`, beginning a change; `leave()`
    without an instant closes it as soon as it sees the request."""

    def __init__(
        self,
        name: str,
        config: dict[str, str],
        topic: str,
        ownership: _Ownership,
        change_at: float | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.config, self.topic, self.ownership = config, topic, ownership
        self.change_at = change_at
        self.stopping = threading.Event()

    def _revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.ownership.revoked(self.name, (tp.partition for tp in partitions))

    def _assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.ownership.assigned(self.name, (tp.partition for tp in partitions))

    def _wait_for_change(self) -> None:
        if self.change_at is not None:
            time.sleep(max(0.0, self.change_at - time.monotonic()))
            self.ownership.begin()

    def run(self) -> None:
        consumer = Consumer(self.config)
        # A joiner's client is connected and has found the group coordinator (librdkafka
        # looks it up from construction on) before the clock starts: its first
        # FindCoordinator, sent on the bootstrap connection, is lost when the broker's
        # advertised address replaces that connection, and the retry waits 50 ms or more,
        # whichever the broker (debug=cgrp,broker); that would time the client's start.
        consumer.list_topics(self.topic, timeout=30)
        self._wait_for_change()
        consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self.change_at = None
        while not (self.stopping.is_set() and self._due()):
            message = consumer.poll(self._poll_timeout())
            if message is None or message.error():
                continue
            value, partition = message.value(), message.partition()
            if value is not None and partition is not None:
                (produced_at,) = _TIMESTAMP.unpack(value)
                self.ownership.delivered(self.name, partition, produced_at)
        self._wait_for_change()
        consumer.close()
        self.ownership.left(self.name)

    def _due(self) -> bool:
        return self.change_at is None or time.monotonic() >= self.change_at

    def _poll_timeout(self) -> float:
        if self.stopping.is_set() and self.change_at is not None:
            return min(_POLL_TIMEOUT_S, max(0.0, self.change_at - time.monotonic()))
        return _POLL_TIMEOUT_S

    def leave(self, at: float | None = None) -> None:
        self.change_at = at
        self.stopping.set()


class _Trickle(threading.Thread):
    """A record to every partition every `period_s`, valued with its send time."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, period_s: float) -> None:
        super().__init__(name="trickle", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "1"})
        self.topic, self.partitions, self.period_s = topic, partitions, period_s
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.period_s):
            for partition in range(self.partitions):
                value = _TIMESTAMP.pack(time.monotonic())
                self.producer.produce(self.topic, value, partition=partition)
            self.producer.poll(0)
        self.producer.flush(30)


@dataclass(frozen=True)
class RebalanceResult:
    join_s: list[float]
    leave_s: list[float]


def measure_rebalances(
    bootstrap: str,
    topic: str,
    partitions: int,
    protocol: dict[str, str],
    members: int,
    rounds: int,
    trickle_period_s: float = 0.05,
    timeout_s: float = 120.0,
) -> RebalanceResult:
    """Start a group of `members` on `topic` (already created, `partitions` partitions), wait
    until it is consuming, then `rounds` times: one member joins (timed from its subscribe()),
    then the oldest member leaves (timed from its close()), so the group is back to `members`."""
    group = f"rebalance-{uuid.uuid4().hex[:8]}"
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
        **protocol,
    }
    ownership = _Ownership(partitions)
    trickle = _Trickle(bootstrap, topic, partitions, trickle_period_s)
    trickle.start()
    group_members: list[_Member] = []
    result = RebalanceResult([], [])
    try:
        ownership.begin()
        for index in range(members):
            group_members.append(_Member(f"m{index}", config, topic, ownership))
            group_members[-1].start()
        ownership.wait_until_absorbed([m.name for m in group_members], timeout_s)
        for round_ in range(rounds):
            # Members learn of a change from their next heartbeat, and a group's heartbeats
            # keep the phase its last rebalance gave them: each round starts its changes at
            # another fraction of the interval, the same fractions for both brokers.
            phase_s = _HEARTBEAT_S * (round_ + 0.5) / rounds
            ownership.begun.clear()
            joining = _Member(
                f"j{round_}",
                config,
                topic,
                ownership,
                change_at=time.monotonic() + _CLIENT_START_S + phase_s,
            )
            joining.start()
            group_members.append(joining)
            names = [m.name for m in group_members]
            result.join_s.append(ownership.wait_until_absorbed(names, timeout_s))
            ownership.begun.clear()
            leaving = group_members.pop(0)
            leaving.leave(at=time.monotonic() + phase_s)
            names = [m.name for m in group_members]
            result.leave_s.append(ownership.wait_until_absorbed(names, timeout_s))
            leaving.join(timeout_s)
    finally:
        for member in group_members:
            member.leave()
        for member in group_members:
            member.join(timeout_s)
        trickle.stopping.set()
        trickle.join(timeout_s)
    return result
