"""The `uniform` assignor for members with different subscriptions: Kafka's
`UniformHeterogeneousAssignmentBuilder` (KAFKA-17710).

1. Every member keeps the partitions of its current assignment that it still subscribes to.
2. Unassigned partitions are handed out topic by topic to the topic's least loaded subscribers.
3. Topic by topic, partitions move from the most to the least loaded subscribers until each
   topic's subscribers differ by at most one partition, in passes over all topics until a pass
   moves nothing (at most 16 passes). Subscribers with overlapping but different subscriptions
   may end up only almost balanced, as in Kafka.

Members are numbered in member id order; that number breaks ties between equally loaded members.
Topics are visited by partitions per subscriber (descending), then subscriber count (ascending),
then topic id.
"""

import heapq
import uuid
from collections.abc import Mapping

from krust.group.consumer.group_spec import (
    GroupSpec,
    MemberAssignments,
    TopicMetadata,
    current_partitions,
    frozen,
    topic_order,
    topic_subscribers,
)

MAX_ITERATION_COUNT = 16
"""Balancing passes over the topics; each roughly halves the imbalance (Kafka's limit)."""

UNASSIGNED = -1


def assign_heterogeneous(
    member_ids: list[str],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    group: GroupSpec,
    topics: Mapping[uuid.UUID, TopicMetadata],
) -> MemberAssignments:
    """The new assignment of `member_ids` (sorted), each subscribed to the existing topics in
    `subscriptions`."""
    builder = _Builder(member_ids, subscriptions, topics)
    current = current_partitions(member_ids, subscriptions, group, topics)
    for index, member_id in enumerate(member_ids):
        for topic_id, partitions in current[member_id].items():
            for partition in partitions:
                builder.assign(topic_id, partition, index)
    builder.assign_unassigned()
    builder.balance()
    return {member_id: frozen(builder.target[i]) for i, member_id in enumerate(member_ids)}


class _Builder:
    def __init__(
        self,
        member_ids: list[str],
        subscriptions: Mapping[str, frozenset[uuid.UUID]],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> None:
        self.subscribers = topic_subscribers(member_ids, subscriptions)
        self.partition_counts = {t: topics[t].partitions for t in self.subscribers}
        self.owners = {t: [UNASSIGNED] * n for t, n in self.partition_counts.items()}
        self.target: list[dict[uuid.UUID, set[int]]] = [{} for _ in member_ids]
        self.sizes = [0] * len(member_ids)

    def topic_key(self, topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        subscribers = len(self.subscribers[topic_id])
        per_subscriber = self.partition_counts[topic_id] / subscribers
        return -per_subscriber, subscribers, topic_order(topic_id)

    def by_load(self, members: list[int]) -> list[int]:
        """`members` (ascending) sorted by (load, number): the sort is stable."""
        return sorted(members, key=self.sizes.__getitem__)

    def assign(self, topic_id: uuid.UUID, partition: int, member: int) -> None:
        owners = self.owners[topic_id]
        previous = owners[partition]
        if previous != UNASSIGNED:
            parts = self.target[previous][topic_id]
            parts.discard(partition)
            if not parts:
                del self.target[previous][topic_id]
            self.sizes[previous] -= 1
        self.target[member].setdefault(topic_id, set()).add(partition)
        owners[partition] = member
        self.sizes[member] += 1

    def assign_unassigned(self) -> None:
        unassigned = {
            topic_id: [p for p, owner in enumerate(owners) if owner == UNASSIGNED]
            for topic_id, owners in self.owners.items()
        }
        balancer = _Balancer(self.sizes)
        for topic_id in sorted((t for t, parts in unassigned.items() if parts), key=self.topic_key):
            partitions = unassigned[topic_id]
            subscribers = self.subscribers[topic_id]
            # Handing out k partitions only ever reaches the k least loaded subscribers.
            if len(partitions) < len(subscribers):
                order = heapq.nsmallest(len(partitions), subscribers, key=self.sizes.__getitem__)
            else:
                order = self.by_load(subscribers)
            balancer.initialize(order)
            for partition in partitions:
                self.assign(topic_id, partition, balancer.next_least_loaded())

    def balance(self) -> None:
        topic_ids = sorted(
            (t for t, s in self.subscribers.items() if len(s) >= 2), key=self.topic_key
        )
        balancer = _Balancer(self.sizes)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(topic_ids):
                if index == last_rebalanced:
                    # A whole pass since the last move: nothing more can move.
                    return
                if self.balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def balance_topic(self, topic_id: uuid.UUID, balancer: "_Balancer") -> int:
        """Moves partitions of `topic_id` from its most to its least loaded subscribers; returns
        how many moved."""
        subscribers = self.subscribers[topic_id]
        loads = list(map(self.sizes.__getitem__, subscribers))
        if max(loads) - min(loads) <= 1:
            return 0
        balancer.initialize(self.by_load(subscribers))
        owners = self.owners[topic_id]
        # The topic's partitions grouped by owner, so a member's last one is found at once.
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for position, partition in enumerate(partitions):
            start.setdefault(owners[partition], position)
            end[owners[partition]] = position + 1

        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != UNASSIGNED and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()
                giver = balancer.next_most_loaded()
            if giver == UNASSIGNED:
                break
            end[giver] -= 1
            partition = partitions[end[giver]]
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self.assign(topic_id, partition, receiver)
            moved += 1
        return moved


class _Balancer:
    """Kafka's `MemberAssignmentBalancer`: walks members sorted by load from both ends.

    The least loaded range `[0, least_end)` holds the members at the lowest load level; it
    receives one partition per member, then its level rises by one and members already at that
    level join it. The most loaded range `[most_start, most_end)` does the mirror image, giving
    partitions up; a member with no partition of the topic left is excluded from it.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.order: list[int] = []
        self.least_end = 0
        self.least_level = 0
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_level = 0
        self.next_most = 0

    def initialize(self, order: list[int]) -> None:
        """Starts over on `order`, members sorted by (load, number)."""
        self.order = order
        self.least_end = 0
        self.least_level = self.sizes[order[0]] - 1
        self.next_least = 0
        self.most_start = len(order)
        self.most_end = len(order)
        self.most_level = self.sizes[order[-1]] + 1
        self.next_most = len(order) - 1

    def next_least_loaded(self) -> int:
        """The member to receive the next partition."""
        order, sizes = self.order, self.sizes
        if self.next_least >= self.least_end:
            self.least_level += 1
            while self.least_end < len(order) and sizes[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.next_least = 0
        member = order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to give up the next partition, or UNASSIGNED when none is left."""
        order, sizes = self.order, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Exclusions emptied the range: restart from the next level down.
                self.most_level = sizes[order[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and sizes[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return UNASSIGNED
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member last returned by next_most_loaded from the most loaded range."""
        position, last = self.next_most + 1, self.most_end - 1
        self.order[position], self.order[last] = self.order[last], self.order[position]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_level - self.least_level <= 1
