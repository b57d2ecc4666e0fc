"""What a server-side assignor (KIP-848) is given and what it returns, and the input checks all
of them share: which subscribed topics exist, a current assignment cleaned of what no longer
exists, and the orders that make an assignment deterministic.

Kafka's assignors iterate hash maps and sets in places (member ids, a member's topics); krust
iterates members by member id and topics in the order of Kafka's `Uuid.compareTo`, so the same
input always gives the same output.
"""

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""A member's partitions: topic id -> partition indices."""

MemberAssignments = dict[str, dict[uuid.UUID, frozenset[int]]]
"""An assignor's answer: member id -> topic id -> partition indices."""


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the assignor sees it."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment
    """The member's current target assignment: the input for stickiness."""
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True)
class TopicMetadata:
    """A topic the group may be subscribed to."""

    name: str
    partitions: int
    """The partition count."""


@dataclass(frozen=True)
class GroupSpec:
    """The group to assign: member id -> subscription."""

    members: Mapping[str, MemberSubscription]


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment."""


class PartitionAssignor(Protocol):
    """A server-side assignor, chosen per group by name (`group.remote.assignor`)."""

    name: str

    def assign(
        self, group: GroupSpec, topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> MemberAssignments:
        """Every member's new target assignment (an empty dict for a member that gets nothing)."""
        ...


def topic_order(topic_id: uuid.UUID) -> tuple[int, int]:
    """Sort key equal to Kafka's `Uuid.compareTo`: the two 64-bit halves compared as signed
    longs, so assignors break ties between topics exactly as Kafka does."""
    high, low = topic_id.int >> 64, topic_id.int & 0xFFFF_FFFF_FFFF_FFFF
    return _signed64(high), _signed64(low)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def existing_subscriptions(
    group: GroupSpec, topics: Mapping[uuid.UUID, TopicMetadata]
) -> dict[str, frozenset[uuid.UUID]]:
    """Each member's subscribed topics that exist. Kafka resolves subscriptions against the
    metadata image, so a deleted or unknown topic never reaches its assignors."""
    # Set-to-set operations reuse the hashes the sets store; `uuid.UUID.__hash__` is Python
    # code, and a large group has members times topics subscriptions to check.
    known = frozenset(topics)
    return {
        member_id: _existing(member.subscribed_topic_ids, known)
        for member_id, member in group.members.items()
    }


def _existing(
    subscribed: frozenset[uuid.UUID], known: frozenset[uuid.UUID]
) -> frozenset[uuid.UUID]:
    return subscribed if subscribed <= known else subscribed & known


def topic_subscribers(
    ordered_members: list[str], subscriptions: Mapping[str, frozenset[uuid.UUID]]
) -> dict[uuid.UUID, list[int]]:
    """Each subscribed topic's subscribers as ascending positions in `ordered_members`.

    Members with the same subscriptions are handled together, since a large group usually has
    few distinct ones; topics subscribed by only one such set share one list."""
    by_subscription: dict[frozenset[uuid.UUID], list[int]] = {}
    for position, member_id in enumerate(ordered_members):
        by_subscription.setdefault(subscriptions[member_id], []).append(position)
    subscribers: dict[uuid.UUID, list[int]] = {}
    merged: set[uuid.UUID] = set()
    for subscribed, positions in by_subscription.items():
        for topic_id in subscribed:
            existing = subscribers.get(topic_id)
            if existing is None:
                subscribers[topic_id] = positions
            elif topic_id in merged:
                existing.extend(positions)
            else:
                subscribers[topic_id] = existing + positions
                merged.add(topic_id)
    for topic_id in merged:
        subscribers[topic_id].sort()
    return subscribers


def current_partitions(
    member_ids: list[str],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    group: GroupSpec,
    topics: Mapping[uuid.UUID, TopicMetadata],
) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Each member's current assignment restricted to what it may keep: topics it still
    subscribes to, partitions that still exist, and a partition claimed by two members only
    for the first of them in `member_ids` order. Topics in `topic_order`, partitions ascending.

    Kafka's target assignment never holds a partition twice; the de-duplication keeps a corrupt
    input from assigning a partition twice or losing one."""
    claimed: dict[uuid.UUID, set[int]] = {}
    result: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id in member_ids:
        subscribed = subscriptions[member_id]
        kept: dict[uuid.UUID, list[int]] = {}
        current = group.members[member_id].assignment
        for topic_id in sorted((t for t in current if t in subscribed), key=topic_order):
            count = topics[topic_id].partitions
            taken = claimed.setdefault(topic_id, set())
            partitions = [p for p in sorted(current[topic_id]) if 0 <= p < count and p not in taken]
            if partitions:
                taken.update(partitions)
                kept[topic_id] = partitions
        result[member_id] = kept
    return result


def frozen(assignment: Mapping[uuid.UUID, Collection[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment as frozensets, without topics that have no partition."""
    return {topic_id: frozenset(parts) for topic_id, parts in assignment.items() if parts}
