"""Kafka's CurrentAssignmentBuilder: one step of a member's reconciliation towards its target.

A member never gets a partition another member still owns, and gives up partitions before it
is given new ones: while it must revoke, it stays at its epoch in UNREVOKED_PARTITIONS and is
told only what it keeps; once it reports (in its heartbeat's owned partitions) that the revoked
ones are gone, it moves to the target epoch and gets the partitions that are free. Those still
owned elsewhere wait (UNRELEASED_PARTITIONS) until their owner lets go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from krust.group.consumer.group_spec import Assignment, frozen
from krust.group.consumer.member import ConsumerGroupMember, MemberState
from krust.group.results import CoordinatorError, ErrorCode

OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]]
"""What a heartbeat says the member owns: (topic id, partitions) pairs; None when not sent."""

PartitionEpoch = Callable[[uuid.UUID, int], int]
"""The epoch of the member that owns a partition now, -1 when it is free."""


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions | None,
    subscribed_topic_ids: frozenset[uuid.UUID],
) -> ConsumerGroupMember:
    """The member's next state, or `member` itself when it cannot move forward yet."""
    step = _Step(member, target_epoch, target, partition_epoch, owned, subscribed_topic_ids)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        return step.drop_unsubscribed()
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.partitions_pending_revocation):
            return step.drop_unsubscribed()
        return step.next_assignment(member.member_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    if owned is None or owned:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin.",
        )
    return step.next_assignment(target_epoch)


class _Step:
    def __init__(
        self,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: Assignment,
        partition_epoch: PartitionEpoch,
        owned: OwnedPartitions | None,
        subscribed_topic_ids: frozenset[uuid.UUID],
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.partition_epoch = partition_epoch
        self.owned = owned
        self.subscribed = subscribed_topic_ids

    def owns_any(self, partitions: Assignment) -> bool:
        """Whether the member still reports one of `partitions`; unknown (None) counts as yes."""
        if self.owned is None:
            return True
        return any(
            partition in partitions.get(topic_id, frozenset())
            for topic_id, owned_partitions in self.owned
            for partition in owned_partitions
        )

    def drop_unsubscribed(self) -> ConsumerGroupMember:
        """Revoke at once the partitions of topics the member no longer subscribes to."""
        member = self.member
        kept = {t: p for t, p in member.assigned_partitions.items() if t in self.subscribed}
        if len(kept) == len(member.assigned_partitions):
            return member
        revoking = dict(member.partitions_pending_revocation)
        for topic_id, partitions in member.assigned_partitions.items():
            if topic_id not in kept:
                revoking[topic_id] = revoking.get(topic_id, frozenset()) | partitions
        if self.owns_any(revoking):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=kept,
                partitions_pending_revocation=revoking,
            )
        return replace(member, assigned_partitions=kept)

    def next_assignment(self, epoch: int) -> ConsumerGroupMember:
        member = self.member
        assigned: dict[uuid.UUID, set[int]] = {}
        revoking: dict[uuid.UUID, set[int]] = {}
        pending: dict[uuid.UUID, set[int]] = {}
        unreleased = False
        for topic_id in set(self.target) | set(member.assigned_partitions):
            target = (
                self.target.get(topic_id, frozenset())
                if topic_id in self.subscribed
                else frozenset()
            )
            current = member.assigned_partitions.get(topic_id, frozenset())
            still_revoking = member.partitions_pending_revocation.get(topic_id, frozenset())
            assigned[topic_id] = set(current & target)
            revoking[topic_id] = set(current - target)
            free: set[int] = set()
            for partition in target - current:
                # Its own partition pending revocation is not held by anybody else.
                if self.partition_epoch(topic_id, partition) == -1 or partition in still_revoking:
                    free.add(partition)
                else:
                    unreleased = True
            pending[topic_id] = free
        new_revoking = frozen(revoking)
        if new_revoking and self.owns_any(new_revoking):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=frozen(assigned),
                partitions_pending_revocation=new_revoking,
            ).with_epoch(epoch)
        for topic_id, partitions in pending.items():
            assigned[topic_id] |= partitions
        return replace(
            member,
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            assigned_partitions=frozen(assigned),
            partitions_pending_revocation={},
        ).with_epoch(self.target_epoch)
