"""Online upgrade and downgrade between the two group types (KIP-848's migration).

A non-empty classic group whose members use the consumer protocol type becomes a consumer group
when a member joins with ConsumerGroupHeartbeat (upgrade); a consumer group becomes a classic
group again when the last member using the consumer protocol leaves and only classic members
remain (downgrade). `group.consumer.migration.policy` allows either, both or neither. Each
conversion is a batch of records in `__consumer_offsets`: the old type's tombstones, then the new
type's records, as Kafka's convertToConsumerGroup and convertToClassicGroup write them. Members
keep their partitions across the change.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from krust.coordinator.clock import Clock
from krust.coordinator.wire import RecordFormatError
from krust.group.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from krust.group.classic.group_manager import GroupManager
from krust.group.classic.member import ClassicGroupMember
from krust.group.cluster import ImageView, TopicView
from krust.group.consumer.consumer_protocol import (
    by_id,
    by_name,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    subscription_version,
)
from krust.group.consumer.group import (
    ConsumerGroup,
    assignment_epoch_record,
    current_assignment_record,
    epoch_record,
    group_tombstones,
    member_record,
    target_assignment_record,
)
from krust.group.consumer.heartbeat import ConsumerGroupHeartbeats
from krust.group.consumer.member import ConsumerGroupMember, MemberState
from krust.group.consumer.subscription import metadata_hash, subscribed_topics
from krust.group.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
)
from krust.group.records import CoordinatorRecord, GroupMetadataKey
from krust.group.results import CoordinatorError, ErrorCode
from krust.group.settings import GroupCoordinatorConfig

log = logging.getLogger(__name__)


class GroupMigration:
    """The conversions, applied to the coordinator's classic and consumer groups."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        classic_groups: GroupManager,
        consumer_groups: ConsumerGroupHeartbeats,
        image: Callable[[], ImageView],
        clock: Clock,
    ) -> None:
        self._config = config
        self._classic = classic_groups
        self._consumer = consumer_groups
        self._image = image
        self._clock = clock

    def may_upgrade(self, classic: ClassicGroup) -> bool:
        return may_upgrade(classic, self._config)

    def upgrade(self, classic: ClassicGroup, records: list[CoordinatorRecord]) -> ConsumerGroup:
        """The classic group becomes a consumer group, `records` the conversion's."""
        group, conversion = to_consumer_group(classic, self._image().topics)
        log.info("[GroupId %s] Upgrading the classic group to a consumer group.", group.group_id)
        # Parked JoinGroup and SyncGroup requests are told to rejoin, now as members of the
        # consumer group.
        self._classic.unload([group.group_id], ErrorCode.rebalance_in_progress)
        records.extend(conversion)
        self._consumer.install([group])
        return group

    def downgrade(
        self, group: ConsumerGroup, leaving: str | None, records: list[CoordinatorRecord]
    ) -> bool:
        """The consumer group without `leaving` becomes a classic group, if it may; when a
        member left, a rebalance starts at once so that the classic members rejoin (Kafka's
        convertToClassicGroup)."""
        if not may_downgrade(group, leaving, self._config):
            return False
        topics_by_id = {t.topic_id: name for name, t in self._image().topics.items()}
        try:
            classic, conversion = to_classic_group(
                group, leaving, topics_by_id, self._clock.now_ms()
            )
        except RecordFormatError:
            log.warning(
                "[GroupId %s] Cannot downgrade: a member's consumer protocol is malformed.",
                group.group_id,
            )
            return False
        log.info("[GroupId %s] Downgrading the consumer group to a classic group.", group.group_id)
        records.extend(conversion)
        self._classic.adopt(classic, rebalance=leaving is not None)
        return True


def may_upgrade(classic: ClassicGroup, config: GroupCoordinatorConfig) -> bool:
    """Kafka's validateOnlineUpgrade."""
    group_id = classic.group_id
    if not config.group_consumer_migration_policy.upgrade_enabled:
        log.info("Cannot upgrade classic group %s: the online upgrade is disabled.", group_id)
        return False
    if not classic.uses_consumer_protocol():
        log.info(
            "Cannot upgrade classic group %s: it does not use the consumer embedded protocol.",
            group_id,
        )
        return False
    if len(classic.members) > config.group_consumer_max_size:
        log.info(
            "Cannot upgrade classic group %s: it has more members than a consumer group may.",
            group_id,
        )
        return False
    return True


def may_downgrade(
    group: ConsumerGroup, leaving: str | None, config: GroupCoordinatorConfig
) -> bool:
    """Kafka's validateOnlineDowngradeWith{FencedMember,ReplacedMemberId}: the leaving member
    is the last one on the consumer protocol and classic members remain; or (`leaving` None)
    every member now uses the classic protocol."""
    others = [m for m in group.members.values() if m.member_id != leaving]
    if leaving is not None:
        member = group.members.get(leaving)
        if member is None or member.uses_classic_protocol:
            return False
    if not others:
        return False
    if not all(m.uses_classic_protocol for m in others):
        return False
    if not config.group_consumer_migration_policy.downgrade_enabled:
        log.info(
            "Cannot downgrade consumer group %s: the online downgrade is disabled.",
            group.group_id,
        )
        return False
    if len(others) > config.group_max_size:
        log.info(
            "Cannot downgrade consumer group %s: it has more members than a classic group may.",
            group.group_id,
        )
        return False
    return True


def to_consumer_group(
    classic: ClassicGroup, image_topics: Mapping[str, TopicView]
) -> tuple[ConsumerGroup, list[CoordinatorRecord]]:
    """Kafka's ConsumerGroup.fromClassicGroup and its records: every member at the classic
    generation, Stable, owning and targeted with its last classic assignment."""
    group_id = classic.group_id
    generation = classic.generation_id
    members: list[ConsumerGroupMember] = []
    try:
        for member in classic.members.values():
            subscription = parse_subscription(member.metadata(classic.protocol_name))
            assigned = by_id(parse_assignment(member.assignment), image_topics)
            members.append(
                ConsumerGroupMember(
                    member.member_id,
                    instance_id=member.group_instance_id,
                    rack_id=subscription.rack_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    subscribed_topic_names=subscription.topics,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    assigned_partitions=assigned,
                    classic_member_metadata=ClassicMemberMetadata(
                        session_timeout_ms=member.session_timeout_ms,
                        supported_protocols=tuple(
                            ClassicProtocol(name, metadata) for name, metadata in member.protocols
                        ),
                    ),
                )
            )
    except RecordFormatError:
        raise CoordinatorError(
            ErrorCode.group_id_not_found,
            f"Cannot upgrade the classic group {group_id} to consumer group because the "
            "embedded consumer protocol is malformed.",
        ) from None
    topics = {name for m in members for name in m.subscribed_topic_names}
    records: list[CoordinatorRecord] = [(GroupMetadataKey(group_id), None)]
    records.extend(member_record(group_id, m) for m in members)
    records.append(
        epoch_record(group_id, generation, metadata_hash(subscribed_topics(topics, image_topics)))
    )
    records.extend(
        target_assignment_record(group_id, m.member_id, m.assigned_partitions) for m in members
    )
    records.append(assignment_epoch_record(group_id, generation))
    records.extend(current_assignment_record(group_id, m) for m in members)
    group = ConsumerGroup(group_id)
    for record in records[1:]:
        group.apply(record)
    return group, records


def to_classic_group(
    group: ConsumerGroup, leaving: str | None, topics_by_id: Mapping[uuid.UUID, str], now_ms: int
) -> tuple[ClassicGroup, list[CoordinatorRecord]]:
    """Kafka's ClassicGroup.fromConsumerGroup and its records: a Stable classic group at the
    group epoch, each remaining member's assignment its target in the consumer group."""
    group_id = group.group_id
    members = [m for m in group.members.values() if m.member_id != leaving]
    classic = ClassicGroup.stable(
        group_id,
        now_ms,
        group.group_epoch,
        [
            ClassicGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic_member_metadata.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=tuple(
                    (p.name, p.metadata) for p in m.classic_member_metadata.supported_protocols
                ),
            )
            for m in members
            if m.classic_member_metadata is not None
        ],
    )
    for member in classic.members.values():
        version = subscription_version(member.metadata(classic.protocol_name))
        member.assignment = serialize_assignment(
            by_name(group.target_of(member.member_id), topics_by_id), version
        )
    records = group_tombstones(group)
    records.append((GroupMetadataKey(group_id), classic.to_record(classic.assignments())))
    return classic, records
