"""Kafka's TargetAssignmentBuilder: the group's next target assignment from its assignor.

The assignor sees every member's subscription (topic ids, names resolved and regexes
expanded against the image) and current target, so it can stay sticky; only members whose
target changed get a new ConsumerGroupTargetAssignmentMember record.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from krust.group.cluster import TopicView
from krust.group.consumer.assignor import (
    ASSIGNORS,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    TopicMetadata,
)
from krust.group.consumer.group import ConsumerGroup
from krust.group.consumer.group_spec import Assignment, frozen
from krust.group.consumer.member import ConsumerGroupMember
from krust.group.consumer.subscription import SubscribedTopic, subscribed_topics
from krust.group.results import CoordinatorError, ErrorCode


def member_topic_ids(
    group: ConsumerGroup, member: ConsumerGroupMember, image_topics: Mapping[str, TopicView]
) -> frozenset[uuid.UUID]:
    """The ids of the existing topics the member subscribes to, by name or regex."""
    return frozenset(subscribed_topics(group.member_topics(member), image_topics))


def preferred_assignor(group: ConsumerGroup, assignors: Sequence[str]) -> str:
    """The assignor most members ask for (a tie goes to the one configured first); the first
    configured one when no member asks."""
    counts: dict[str, int] = {}
    for member in group.members.values():
        name = member.server_assignor
        if name is not None and name in assignors:
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return assignors[0]
    return max(counts, key=lambda name: (counts[name], -assignors.index(name)))


def changed_targets(
    group: ConsumerGroup,
    image_topics: Mapping[str, TopicView],
    topics: Mapping[uuid.UUID, SubscribedTopic],
    assignor_name: str,
) -> dict[str, Assignment]:
    """The members whose target differs in the new assignment, with their new target."""
    spec = GroupSpec(
        members={
            member_id: MemberSubscription(
                subscribed_topic_ids=member_topic_ids(group, member, image_topics),
                assignment=group.target_of(member_id),
                instance_id=member.instance_id,
                rack_id=member.rack_id,
            )
            for member_id, member in group.members.items()
        }
    )
    try:
        target = ASSIGNORS[assignor_name].assign(
            spec, {t.topic_id: TopicMetadata(t.name, t.partitions) for t in topics.values()}
        )
    except PartitionAssignorError as failed:
        raise CoordinatorError(
            ErrorCode.unknown_server_error,
            f"Failed to compute a new target assignment for epoch {group.group_epoch}: {failed}.",
        ) from None
    changed: dict[str, Assignment] = {}
    for member_id in group.members:
        new = frozen(target.get(member_id, {}))
        if new != frozen(group.target_of(member_id)):
            changed[member_id] = new
    return changed
