"""One member of a KIP-848 consumer group: its subscription and where its reconciliation stands."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from krust.group.consumer.group_spec import Assignment
from krust.group.consumer_group_records import ClassicMemberMetadata

# Kafka's member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with its byte values (they are written to __consumer_offsets)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    # Set for a member that joined with the classic protocol (JoinGroup), KIP-848's bridge.
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's updateMemberEpoch: the previous epoch remembers the current one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        return self.subscribed_topic_names, self.subscribed_topic_regex
