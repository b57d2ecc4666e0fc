"""The `uniform` server-side assignor (KIP-848), Kafka 4.x's default for consumer groups:
balanced first, then sticky.

When every member subscribes to the same topics (Kafka's HOMOGENEOUS subscription type) each
member's quota is a share of the total: `total // members`, and `total % members` of them get
one partition more. A member keeps its current partitions up to its quota; the rest are handed
out. Since KAFKA-18688 (Kafka 4.1) any member that already holds the extra partition may keep
it, so an assignment that is already balanced does not move. Otherwise (HETEROGENEOUS) the
heterogeneous builder balances topic by topic (uniform_heterogeneous.py).
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from krust.group.consumer.group_spec import (
    GroupSpec,
    MemberAssignments,
    PartitionAssignorError,
    TopicMetadata,
    current_partitions,
    existing_subscriptions,
    frozen,
    topic_order,
)
from krust.group.consumer.uniform_heterogeneous import assign_heterogeneous


class UniformAssignor:
    """Kafka's `UniformAssignor`."""

    name = "uniform"

    def assign(
        self, group: GroupSpec, topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> MemberAssignments:
        member_ids = sorted(group.members)
        subscriptions = existing_subscriptions(group, topics)
        if len(set(subscriptions.values())) <= 1:
            return _assign_homogeneous(member_ids, subscriptions, group, topics)
        return assign_heterogeneous(member_ids, subscriptions, group, topics)


@dataclass
class _Unfilled:
    """A member below its quota after keeping what it could."""

    member_id: str
    quota: int
    """How many more partitions it receives."""


def _assign_homogeneous(
    member_ids: list[str],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    group: GroupSpec,
    topics: Mapping[uuid.UUID, TopicMetadata],
) -> MemberAssignments:
    if not member_ids:
        return {}
    subscribed = sorted(subscriptions[member_ids[0]], key=topic_order)
    current = current_partitions(member_ids, subscriptions, group, topics)

    # Partitions nobody holds come first, then those revoked above a member's quota.
    owned = {t: set[int]() for t in subscribed}
    for held in current.values():
        for topic_id, partitions in held.items():
            owned[topic_id].update(partitions)
    unassigned = [
        (topic_id, p)
        for topic_id in subscribed
        for p in range(topics[topic_id].partitions)
        if p not in owned[topic_id]
    ]

    total = sum(topics[t].partitions for t in subscribed)
    minimum_quota, extra_partitions = divmod(total, len(member_ids))
    target: dict[str, dict[uuid.UUID, list[int]]] = {}
    unfilled: list[_Unfilled] = []
    for member_id in member_ids:
        quota = minimum_quota
        takes_extra = extra_partitions > 0
        if takes_extra:
            quota += 1
        kept: dict[uuid.UUID, list[int]] = {}
        for topic_id, partitions in current[member_id].items():
            keep = min(quota, len(partitions))
            if keep:
                kept[topic_id] = partitions[:keep]
            unassigned.extend((topic_id, p) for p in partitions[keep:])
            quota -= keep
        if quota > 0 and takes_extra:
            # It did not hold the extra partition already: leave it for a member that does.
            quota -= 1
            takes_extra = False
        if takes_extra:
            extra_partitions -= 1
        target[member_id] = kept
        if quota > 0 or (extra_partitions > 0 and not takes_extra):
            unfilled.append(_Unfilled(member_id, quota))

    # Extra partitions nobody claimed go to the last unfilled members, as in Kafka.
    for entry in reversed(unfilled):
        if extra_partitions > 0:
            extra_partitions -= 1
            entry.quota += 1

    position = 0
    for entry in unfilled:
        receiving = target[entry.member_id]
        for topic_id, partition in unassigned[position : position + entry.quota]:
            receiving.setdefault(topic_id, []).append(partition)
        position += entry.quota
    if position < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return {member_id: frozen(kept) for member_id, kept in target.items()}
