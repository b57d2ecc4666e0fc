"""Classic members in a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (KIP-848).

A consumer still on the classic protocol can be a member of a consumer group. Its JoinGroup is a
full heartbeat: the subscription and owned partitions come from its ConsumerProtocolSubscription,
the broker's assignor computes the assignment, and the member takes one reconciliation step; the
JoinGroup answers with the member epoch as the generation, and SyncGroup returns the member's
partitions as a ConsumerProtocolAssignment. Its Heartbeat answers REBALANCE_IN_PROGRESS whenever
it must rejoin to move on (a new group epoch, partitions to revoke, or partitions now free).
Kafka's GroupMetadataManager.classicGroup*ToConsumerGroup are the model, step for step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from krust.coordinator.wire import RecordFormatError
from krust.group.classic.group import CONSUMER_PROTOCOL_TYPE
from krust.group.classic.group_manager import JoinGroupRequest, LeavingMember, SyncGroupRequest
from krust.group.cluster import ImageView
from krust.group.consumer.consumer_protocol import (
    by_id,
    by_name,
    parse_subscription,
    serialize_assignment,
    subscription_version,
)
from krust.group.consumer.group import ConsumerGroup
from krust.group.consumer.heartbeat import ConsumerGroupHeartbeats
from krust.group.consumer.heartbeat_request import new_member_id
from krust.group.consumer.member import ConsumerGroupMember, MemberState
from krust.group.consumer_group_records import ClassicMemberMetadata, ClassicProtocol
from krust.group.records import CoordinatorRecord
from krust.group.results import CoordinatorError, ErrorCode, JoinGroupResult, SyncGroupResult

log = logging.getLogger(__name__)


class ClassicMembers:
    def __init__(self, heartbeats: ConsumerGroupHeartbeats, image: Callable[[], ImageView]) -> None:
        self._heartbeats = heartbeats
        self._image = image

    # -- JoinGroup -----------------------------------------------------------------------------

    async def join(self, group: ConsumerGroup, request: JoinGroupRequest) -> JoinGroupResult:
        records: list[CoordinatorRecord] = []
        try:
            result = self._join(group, request, records)
        except CoordinatorError as refused:
            return JoinGroupResult(refused.error, member_id=request.member_id)
        if records and not await self._heartbeats.write(group.group_id, records):
            return JoinGroupResult(ErrorCode.coordinator_not_available, member_id=request.member_id)
        if result.error is ErrorCode.none and group.group_id in self._heartbeats.groups:
            timers = self._heartbeats.timers
            timers.cancel(("join", group.group_id, result.member_id))
            self._heartbeats.start_session(group.group_id, result.member_id)
            # The member must come back with its SyncGroup within its rebalance timeout.
            timers.schedule(
                ("sync", group.group_id, result.member_id),
                request.rebalance_timeout_ms,
                lambda: self._heartbeats.expire(
                    group.group_id, result.member_id, "not syncing within its rebalance timeout"
                ),
            )
        return result

    def _join(
        self, group: ConsumerGroup, request: JoinGroupRequest, records: list[CoordinatorRecord]
    ) -> JoinGroupResult:
        member_id = request.member_id or new_member_id()
        limit = self._heartbeats.config.group_consumer_max_size
        if len(group.members) >= limit and member_id not in group.members:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {limit} members.",
            )
        if not supports_classic_protocols(group, request.protocol_type, request.protocols):
            raise CoordinatorError(
                ErrorCode.inconsistent_group_protocol,
                f"Member {member_id}'s protocols are not supported.",
            )
        if (
            request.require_known_member_id
            and not request.member_id
            and request.group_instance_id is None
        ):
            # KIP-394: the member comes back with this id; nothing is stored until then.
            return JoinGroupResult(ErrorCode.member_id_required, member_id=member_id)
        member, replaced = self._member(group, request, member_id, records)
        try:
            subscription = parse_subscription(request.protocols[0][1])
        except RecordFormatError:
            raise CoordinatorError(
                ErrorCode.unknown_server_error,
                "Malformed embedded consumer protocol in subscription deserialization.",
            ) from None
        updated = replace(
            member,
            instance_id=request.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics,
            client_id=request.client_id,
            client_host=request.client_host,
            classic_member_metadata=ClassicMemberMetadata(
                session_timeout_ms=request.session_timeout_ms,
                supported_protocols=tuple(
                    ClassicProtocol(name, metadata) for name, metadata in request.protocols
                ),
            ),
        )
        owned = [
            (topic_id, sorted(partitions))
            for topic_id, partitions in by_id(
                subscription.owned_partitions, self._image().topics
            ).items()
        ]
        reconciled = self._heartbeats.update_member(group, member, updated, owned, records)
        downgrade = self._heartbeats.downgrade
        if (
            replaced is not None
            and not replaced.uses_classic_protocol
            and downgrade is not None
            and downgrade(group, None, records)
        ):
            # It replaced the last member on the consumer protocol: the group is classic now.
            self._heartbeats.forget([group.group_id])
        return JoinGroupResult(
            ErrorCode.none,
            member_id=reconciled.member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=request.protocols[0][0],
        )

    def _member(
        self,
        group: ConsumerGroup,
        request: JoinGroupRequest,
        member_id: str,
        records: list[CoordinatorRecord],
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The joining member: known, new, or a static member taking over its instance id
        (whatever protocol the previous one used); and the member it replaced."""
        instance_id = request.group_instance_id
        if instance_id is None:
            known = group.members.get(member_id)
            if known is None:
                log.info(
                    "[GroupId %s] Member %s joins the consumer group using the classic protocol.",
                    group.group_id,
                    member_id,
                )
            return known or ConsumerGroupMember(member_id), None
        existing = group.static_member(instance_id)
        if not request.member_id:
            if existing is None:
                return ConsumerGroupMember(member_id), None
            replacement = self._heartbeats.replace_static_member(
                group, existing, member_id, records
            )
            return replacement, existing
        return group.validated_member(member_id, instance_id), None

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync(self, group: ConsumerGroup, request: SyncGroupRequest) -> SyncGroupResult:
        try:
            member = classic_member(group, request.member_id, request.group_instance_id)
            check_generation(member, request.generation_id)
            protocol_name = member_protocols(member)[0].name
            if (
                request.protocol_type is not None
                and request.protocol_type != CONSUMER_PROTOCOL_TYPE
            ) or (request.protocol_name is not None and request.protocol_name != protocol_name):
                raise CoordinatorError(ErrorCode.inconsistent_group_protocol)
            self._check_rebalance(group, member)
        except CoordinatorError as refused:
            return SyncGroupResult(refused.error)
        self._heartbeats.timers.cancel(("sync", group.group_id, member.member_id))
        self._heartbeats.start_session(group.group_id, member.member_id)
        topics = {t.topic_id: name for name, t in self._image().topics.items()}
        version = subscription_version(member_protocols(member)[0].metadata)
        return SyncGroupResult(
            ErrorCode.none,
            request.protocol_type,
            request.protocol_name,
            serialize_assignment(by_name(member.assigned_partitions, topics), version),
        )

    def _check_rebalance(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A new group epoch: the member rejoins to catch up, unless it is still revoking (its
        next rejoin comes once that is done)."""
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._ask_to_rejoin(group.group_id, member)
            raise CoordinatorError(ErrorCode.rebalance_in_progress)

    def _ask_to_rejoin(self, group_id: str, member: ConsumerGroupMember) -> None:
        """The member must rejoin within its rebalance timeout, or it is fenced."""
        key = ("join", group_id, member.member_id)
        if not self._heartbeats.timers.is_scheduled(key):
            member_id = member.member_id
            self._heartbeats.timers.schedule(
                key,
                member.rebalance_timeout_ms,
                lambda: self._heartbeats.expire(
                    group_id, member_id, "not rejoining within its rebalance timeout"
                ),
            )

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------

    def heartbeat(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode:
        try:
            member = classic_member(group, member_id, instance_id)
            check_generation(member, generation_id)
        except CoordinatorError as refused:
            return refused.error
        self._heartbeats.start_session(group.group_id, member.member_id)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not waits_on_unreleased_partition(group, member)
            )
        ):
            self._ask_to_rejoin(group.group_id, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def leave(
        self, group: ConsumerGroup, leaving: list[LeavingMember]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        records: list[CoordinatorRecord] = []
        results = [self._leave_one(group, m, records) for m in leaving]
        if records:
            self._heartbeats.bump_group_epoch(group, records)
            if not await self._heartbeats.write(group.group_id, records):
                return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, results

    def _leave_one(
        self, group: ConsumerGroup, leaving: LeavingMember, records: list[CoordinatorRecord]
    ) -> LeavingMember:
        member_id, instance_id = leaving.member_id, leaving.group_instance_id
        # An admin removes a static member by its instance id alone (KIP-345).
        static = group.static_member(instance_id) if instance_id and not member_id else None
        try:
            member = classic_member(group, static.member_id if static else member_id, instance_id)
        except CoordinatorError as refused:
            return LeavingMember(member_id, instance_id, refused.error)
        log.info(
            "[GroupId %s] Member %s left the consumer group through LeaveGroup.",
            group.group_id,
            member.member_id,
        )
        self._heartbeats.remove(group, member.member_id, records)
        return LeavingMember(member.member_id, instance_id)


def supports_classic_protocols(
    group: ConsumerGroup, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]
) -> bool:
    """Kafka's supportsClassicProtocols: a consumer-type protocol every classic member has."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    names = {name for name, _ in protocols}
    if group.is_empty():
        return bool(names)
    for member in group.members.values():
        if member.classic_member_metadata is not None:
            names &= {p.name for p in member.classic_member_metadata.supported_protocols}
    return bool(names)


def member_protocols(member: ConsumerGroupMember) -> tuple[ClassicProtocol, ...]:
    assert member.classic_member_metadata is not None
    return member.classic_member_metadata.supported_protocols


def classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember, then the member must be one using the classic
    protocol."""
    member = group.validated_member(member_id, instance_id)
    require_classic(member)
    return member


def require_classic(member: ConsumerGroupMember) -> None:
    if not member.uses_classic_protocol:
        raise CoordinatorError(
            ErrorCode.unknown_member_id,
            f"Member {member.member_id} does not use the classic protocol.",
        )


def check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise CoordinatorError(
            ErrorCode.illegal_generation,
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def waits_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of the member's target is still owned by another member."""
    for topic_id, partitions in group.target_of(member.member_id).items():
        assigned = member.assigned_partitions.get(topic_id, frozenset())
        for partition in partitions - assigned:
            if group.partition_epoch(topic_id, partition) != -1:
                return True
    return False
