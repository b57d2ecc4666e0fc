"""The `range` server-side assignor (KIP-848): Kafka 4.x's `RangeAssignor` (KAFKA-16944).

Each topic's partitions are cut into contiguous ranges, one per subscriber in member order:
`partitions // subscribers` each, the first `partitions % subscribers` subscribers one more.
Topics with the same subscribers and the same partition count are therefore co-partitioned:
a member gets the same partition numbers of each (what joins of such topics need).

Member order: static members (with an instance id) first, by instance id, then the others by
member id. Kafka's server-side range assignor recomputes the assignment from scratch and does
not look at the current one; its only stickiness is that order, which lets a static member that
rejoins under a new member id get its old ranges back.
"""

import uuid
from collections.abc import Mapping

from krust.group.consumer.group_spec import (
    GroupSpec,
    MemberAssignments,
    TopicMetadata,
    existing_subscriptions,
    topic_order,
    topic_subscribers,
)


class RangeAssignor:
    """Kafka's server-side `RangeAssignor`."""

    name = "range"

    def assign(
        self, group: GroupSpec, topics: Mapping[uuid.UUID, TopicMetadata]
    ) -> MemberAssignments:
        ordered = sorted(group.members, key=lambda m: _member_order(group, m))
        subscribers = topic_subscribers(ordered, existing_subscriptions(group, topics))

        result: MemberAssignments = {member_id: {} for member_id in group.members}
        for topic_id in sorted(subscribers, key=topic_order):
            members = subscribers[topic_id]
            count = topics[topic_id].partitions
            quota, extra = divmod(count, len(members))
            # Only the first `count` subscribers can get a non-empty range.
            for position, member in enumerate(members[:count]):
                start = position * quota + min(position, extra)
                end = start + quota + (1 if position < extra else 0)
                result[ordered[member]][topic_id] = frozenset(range(start, end))
        return result


def _member_order(group: GroupSpec, member_id: str) -> tuple[int, str, str]:
    instance_id = group.members[member_id].instance_id
    if instance_id is None:
        return 1, member_id, ""
    return 0, instance_id, member_id
