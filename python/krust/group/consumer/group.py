"""A KIP-848 consumer group: its epochs, members, target assignment and who owns which partition.

State changes only by applying `__consumer_offsets` records (`apply`), whether they were just
produced by a heartbeat or are replayed at load: what the broker serves is what the log says.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from krust.group.consumer.group_spec import Assignment
from krust.group.consumer.member import (
    ConsumerGroupMember,
    MemberState,
)
from krust.group.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from krust.group.records import CoordinatorRecord
from krust.group.results import CoordinatorError, ErrorCode


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp_ms: int


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        # A digest of the subscribed topics' metadata when the group epoch was last bumped: a
        # topic created, deleted or given partitions since then bumps it again.
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.deleted = False
        # Bumped whenever a subscription or a regex resolution changes; what is derived from
        # them is cached until then (heartbeats read it every time, members change it rarely).
        self.subscription_version = 0
        self._subscribed: Counter[str] | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def member(self, member_id: str) -> ConsumerGroupMember:
        """The member, or UNKNOWN_MEMBER_ID."""
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    def validated_member(self, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """The member a request names: by its instance id when it has one (UNKNOWN_MEMBER_ID,
        or FENCED_INSTANCE_ID when the instance id has a newer member), else by member id."""
        if instance_id is None:
            return self.member(member_id)
        member = self.static_member(instance_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown."
            )
        if member.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        return member

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    def subscribed_topic_names(self) -> Mapping[str, int]:
        """How many members subscribe to each topic, by name or through a regex."""
        if self._subscribed is None:
            counts: Counter[str] = Counter()
            for member in self.members.values():
                counts.update(self.member_topics(member))
            self._subscribed = counts
        return self._subscribed

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                topics |= resolved.topics
        return frozenset(topics)

    def regexes_in_use(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    # -- records -------------------------------------------------------------------------------

    def apply(self, record: CoordinatorRecord) -> None:
        """Apply one of this group type's records (a None value is a tombstone)."""
        key, value = record
        if isinstance(key, ConsumerGroupMemberMetadataKey | ConsumerGroupRegularExpressionKey):
            self.subscription_version += 1
            self._subscribed = None
        match key:
            case ConsumerGroupMetadataKey():
                if value is None:
                    self.deleted = True
                else:
                    assert isinstance(value, ConsumerGroupMetadataValue)
                    self.deleted = False
                    self.group_epoch = value.epoch
                    self.metadata_hash = value.metadata_hash
            case ConsumerGroupMemberMetadataKey():
                self._apply_member_metadata(key.member_id, value)
            case ConsumerGroupTargetAssignmentMetadataKey():
                if value is not None:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
                    self.assignment_epoch = value.assignment_epoch
            case ConsumerGroupTargetAssignmentMemberKey():
                if value is None:
                    self.target_assignment.pop(key.member_id, None)
                else:
                    assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                    self.target_assignment[key.member_id] = from_topic_partitions(
                        value.topic_partitions
                    )
            case ConsumerGroupCurrentMemberAssignmentKey():
                self._apply_current_assignment(key.member_id, value)
            case ConsumerGroupRegularExpressionKey():
                if value is None:
                    self.resolved_regexes.pop(key.regular_expression, None)
                else:
                    assert isinstance(value, ConsumerGroupRegularExpressionValue)
                    self.resolved_regexes[key.regular_expression] = ResolvedRegex(
                        frozenset(value.topics), value.version, value.timestamp
                    )
            case _:
                # ConsumerGroupPartitionMetadata (Kafka 4.0): superseded by the metadata hash.
                pass

    def _apply_member_metadata(
        self, member_id: str, value: ConsumerGroupMemberMetadataValue | object | None
    ) -> None:
        if value is None:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._forget_partitions(member)
                if (
                    member.instance_id is not None
                    and self.static_members.get(member.instance_id) == member_id
                ):
                    del self.static_members[member.instance_id]
            return
        assert isinstance(value, ConsumerGroupMemberMetadataValue)
        old = self.members.get(member_id) or ConsumerGroupMember(member_id)
        self.members[member_id] = replace(
            old,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or None,
            server_assignor=value.server_assignor or None,
            classic_member_metadata=value.classic_member_metadata,
        )
        if value.instance_id is not None:
            self.static_members[value.instance_id] = member_id

    def _apply_current_assignment(
        self, member_id: str, value: ConsumerGroupCurrentMemberAssignmentValue | object | None
    ) -> None:
        old = self.members.get(member_id)
        if old is not None:
            self._forget_partitions(old)
        if value is None:
            if old is not None:
                self.members[member_id] = replace(
                    old,
                    member_epoch=0,
                    previous_member_epoch=0,
                    state=MemberState.STABLE,
                    assigned_partitions={},
                    partitions_pending_revocation={},
                )
            return
        assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        member = replace(
            old or ConsumerGroupMember(member_id),
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=state,
            assigned_partitions=from_topic_partitions(value.assigned_partitions),
            partitions_pending_revocation=from_topic_partitions(
                value.partitions_pending_revocation
            ),
        )
        self.members[member_id] = member
        self._own_partitions(member)

    def _own_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs[(topic_id, partition)] = member.member_epoch

    def _forget_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs.pop((topic_id, partition), None)


def to_topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(topic_id=topic_id, partitions=tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items())
        if partitions
    )


def from_topic_partitions(topics: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    assignment: dict[uuid.UUID, frozenset[int]] = {}
    for topic in topics:
        if topic.partitions:
            assignment[topic.topic_id] = assignment.get(topic.topic_id, frozenset()) | frozenset(
                topic.partitions
            )
    return assignment


def member_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    """The member's subscription record (ConsumerGroupMemberMetadata)."""
    return (
        ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex,
            server_assignor=member.server_assignor,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            classic_member_metadata=member.classic_member_metadata,
        ),
    )


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return (
        ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=to_topic_partitions(member.assigned_partitions),
            partitions_pending_revocation=to_topic_partitions(member.partitions_pending_revocation),
        ),
    )


def target_assignment_record(
    group_id: str, member_id: str, assignment: Assignment
) -> CoordinatorRecord:
    return (
        ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
        ConsumerGroupTargetAssignmentMemberValue(topic_partitions=to_topic_partitions(assignment)),
    )


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return (
        ConsumerGroupMetadataKey(group_id=group_id),
        ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def assignment_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return (
        ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
    )


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's order: current assignment, target assignment, then the subscription."""
    return [
        (ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None),
        (ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None),
        (ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords, for deleting the group or turning it
    into a classic one: every member's current and target assignment, the target epoch, every
    subscription, the regexes, then the group epoch."""
    group_id = group.group_id
    ids = list(group.members)
    records: list[CoordinatorRecord] = [
        (ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m), None) for m in ids
    ]
    records.extend(
        (ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=m), None) for m in ids
    )
    records.append((ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None))
    records.extend(
        (ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m), None) for m in ids
    )
    records.extend(
        (ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=r), None)
        for r in sorted(group.resolved_regexes)
    )
    records.append((ConsumerGroupMetadataKey(group_id=group_id), None))
    return records
