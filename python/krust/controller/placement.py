"""Where a new partition's replicas go: Kafka's StripedReplicaPlacer over the active brokers
(unfenced, not in controlled shutdown).

Leaders go round robin over the racks and, within a rack, over its brokers, from a random
start; followers continue over the racks from there, so a partition's replicas spread over as
many racks as there are and the leaders of consecutive partitions are staggered. Brokers
without a rack form one rack of their own. Once every broker has led once, the racks and
brokers are shuffled so the next round does not repeat the same assignments."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

_SYSTEM_RANDOM = random.Random()


class PlacementError(ValueError):
    """The replicas cannot be placed (Kafka answers INVALID_REPLICATION_FACTOR)."""


@dataclass
class _Brokers:
    """One rack's brokers, handed out from a rotating offset, each at most once per round."""

    ids: list[int]
    offset: int = 0
    index: int = 0
    round: int = 0

    def next(self, round_: int) -> int | None:
        if self.round != round_:
            self.round = round_
            self.index = 0
            self.offset = (self.offset + 1) % len(self.ids)
        if self.index >= len(self.ids):
            return None
        broker = self.ids[(self.index + self.offset) % len(self.ids)]
        self.index += 1
        return broker


@dataclass
class _Racks:
    racks: list[_Brokers]
    size: int
    rng: random.Random
    offset: int = 0
    round: int = 0

    def place(self, replication_factor: int) -> tuple[int, ...]:
        if self.round == self.size and self.size > 1:
            self.rng.shuffle(self.racks)
            for rack in self.racks:
                self.rng.shuffle(rack.ids)
            self.round = 0
        if self.offset == len(self.racks):
            self.offset = 0
        first_rack = self.offset
        while (leader := self.racks[first_rack].next(self.round)) is None:
            first_rack = (first_rack + 1) % len(self.racks)
        replicas = [leader]
        # Followers start at the leader's round-robin position, skipping the leader's rack
        # once so the second replica lands on another rack when there is one.
        rack_index: int = self.offset
        skip: int | None = first_rack
        while len(replicas) < replication_factor:
            follower = None
            if rack_index == skip:
                skip = None
            else:
                follower = self.racks[rack_index].next(self.round)
            rack_index = (rack_index + 1) % len(self.racks)
            if follower is not None:
                replicas.append(follower)
        self.round += 1
        self.offset += 1
        return tuple(replicas)


def place_replicas(
    racks: Mapping[int, str | None],
    count: int,
    replication_factor: int,
    rng: random.Random = _SYSTEM_RANDOM,
) -> list[tuple[int, ...]]:
    """Replicas of `count` new partitions over the brokers `racks` names (broker id -> rack,
    the active brokers); the first replica of each leads. Raises PlacementError with Kafka's
    message when the replication factor cannot be met."""
    if replication_factor < 1:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must "
            "be positive."
        )
    if not racks:
        raise PlacementError("All brokers are currently fenced.")
    if replication_factor > len(racks):
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached "
            f"because only {len(racks)} broker(s) are registered."
        )
    by_rack: dict[str | None, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    names = sorted(by_rack, key=lambda name: (name is not None, name or ""))
    lists = []
    for name in names:
        ids = sorted(by_rack[name])
        lists.append(_Brokers(ids, offset=rng.randrange(len(ids))))
    placer = _Racks(lists, len(racks), rng, offset=rng.randrange(len(lists)))
    return [placer.place(replication_factor) for _ in range(count)]
