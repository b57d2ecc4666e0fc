"""ConsumerGroupHeartbeat: joining, reconciling, leaving, and the timeouts that fence members.

Each heartbeat runs synchronously on the coordinator's loop: it checks the request against the
group, produces the `__consumer_offsets` records of every change (new subscription, group epoch
bump, new target assignment, the member's next reconciliation step), applies them to the group
at once, and answers once they are durable. Kafka's GroupMetadataManager.consumerGroupHeartbeat
is the model, step for step.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from krust.coordinator.clock import Clock, KeyedTimer
from krust.group.cluster import ImageView
from krust.group.consumer.group import (
    ConsumerGroup,
    assignment_epoch_record,
    current_assignment_record,
    epoch_record,
    member_record,
    member_tombstones,
    target_assignment_record,
)
from krust.group.consumer.heartbeat_request import (
    HeartbeatRequest,
    HeartbeatResult,
    check_member_epoch,
    new_member_id,
    updated_member,
)
from krust.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from krust.group.consumer.reconciliation import OwnedPartitions, reconcile
from krust.group.consumer.subscription import (
    SubscribedTopic,
    metadata_hash,
    resolve_regex,
    subscribed_topics,
)
from krust.group.consumer.target_assignment import (
    changed_targets,
    member_topic_ids,
    preferred_assignor,
)
from krust.group.consumer_group_records import (
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)
from krust.group.records import CoordinatorRecord
from krust.group.results import CoordinatorError, ErrorCode
from krust.group.settings import GroupCoordinatorConfig

log = logging.getLogger(__name__)

# The group configs (kafka-configs --entity-type groups) a consumer group runs with.
CONSUMER_SESSION_TIMEOUT = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"

WriteRecords = Callable[[str, list[CoordinatorRecord]], Awaitable[bool]]
"""Append a group's records (already applied); False when the append failed."""

Downgrade = Callable[[ConsumerGroup, str | None, list[CoordinatorRecord]], bool]
"""Turn the group into a classic group without the given leaving member (None: a classic static
member just replaced the last member on the consumer protocol), adding the records that do it;
False when the group stays a consumer group (migration.py)."""

# The timers a member may have, by the key's first element.
_MEMBER_TIMERS = ("session", "rebalance", "join", "sync")


class ConsumerGroupHeartbeats:
    """The consumer groups of this coordinator and every change to their membership."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        image: Callable[[], ImageView],
        write: WriteRecords,
        downgrade: Downgrade | None = None,
    ) -> None:
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self._clock = clock
        self._image = image
        self.write = write
        self.downgrade = downgrade
        self.timers = KeyedTimer(clock)
        # Bumped at every metadata change: regexes are resolved again at the next heartbeat.
        self._metadata_generation = 0
        self._resolved_at: dict[str, int] = {}
        self._metadata_cache: dict[
            str, tuple[tuple[int, int], dict[uuid.UUID, SubscribedTopic], int]
        ] = {}
        self._writes: set[asyncio.Future[bool]] = set()

    @property
    def assignors(self) -> tuple[str, ...]:
        return self.config.group_consumer_assignors

    def on_metadata_change(self) -> None:
        self._metadata_generation += 1

    # -- heartbeat -----------------------------------------------------------------------------

    async def heartbeat(
        self,
        request: HeartbeatRequest,
        group: ConsumerGroup,
        records: list[CoordinatorRecord] | None = None,
    ) -> HeartbeatResult:
        """One heartbeat of a member of `group` (the caller found or created it); `records`: those
        that created the group (an upgrade), written with the heartbeat's."""
        records = [] if records is None else records
        try:
            result = self._heartbeat(request, group, records)
        except CoordinatorError as refused:
            result = HeartbeatResult(refused.error, refused.message)
        if records and not await self.write(group.group_id, records):
            return HeartbeatResult(ErrorCode.coordinator_not_available)
        return result

    def _heartbeat(
        self, request: HeartbeatRequest, group: ConsumerGroup, records: list[CoordinatorRecord]
    ) -> HeartbeatResult:
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request, group, records)
        member_id = request.member_id or new_member_id()
        if (
            member_id not in group.members
            and request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
            and len(group.members) >= self.config.group_consumer_max_size
            and (request.instance_id is None or group.static_member(request.instance_id) is None)
        ):
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.",
            )
        member = self._member(request, group, member_id, records)
        updated = updated_member(member, request)
        is_new = member.member_id not in group.members
        reconciled = self.update_member(group, member, updated, request.owned, records)
        self.start_session(group.group_id, member_id)
        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            request.rebalance_timeout_ms != -1
            and (
                request.subscribed_topic_names is not None
                or request.subscribed_topic_regex is not None
            )
            and request.owned is not None
        )
        changed = reconciled.assigned_partitions != member.assigned_partitions or is_new
        return HeartbeatResult(
            ErrorCode.none,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._setting(group.group_id, CONSUMER_HEARTBEAT_INTERVAL),
            assignment=reconciled.assigned_partitions if full or changed else None,
        )

    def update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: OwnedPartitions | None,
        records: list[CoordinatorRecord],
    ) -> ConsumerGroupMember:
        """Kafka's steps of a join or heartbeat, for either protocol: store the member's new
        subscription, bump the group epoch when subscriptions or their topics changed, compute
        the new target assignment, and take the member's next reconciliation step."""
        is_new = member.member_id not in group.members
        subscription_changed = is_new or updated.subscription() != member.subscription()
        if is_new or _metadata_of(updated) != _metadata_of(member):
            self.emit(group, records, member_record(group.group_id, updated))
        self._refresh_regexes(group, records)
        topics, new_hash = self.subscription_metadata(group)
        if subscription_changed or new_hash != group.metadata_hash:
            self.emit(group, records, epoch_record(group.group_id, group.group_epoch + 1, new_hash))
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, topics, records)
        return self._reconcile(group, group.members[updated.member_id], owned, records)

    def _member(
        self,
        request: HeartbeatRequest,
        group: ConsumerGroup,
        member_id: str,
        records: list[CoordinatorRecord],
    ) -> ConsumerGroupMember:
        """The member this heartbeat speaks for (Kafka's getOrMaybeSubscribe*Member)."""
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        known = group.members.get(member_id)
        if (
            joining
            and known is not None
            and (request.instance_id is None or known.instance_id == request.instance_id)
        ):
            # A member rejoins under its id after it was fenced or lost its partitions: it owns
            # nothing now (it must join with no partitions), so it starts again from epoch 0.
            restarted = replace(
                known,
                member_epoch=0,
                previous_member_epoch=0,
                state=MemberState.STABLE,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
            if restarted != known:
                self.emit(group, records, current_assignment_record(group.group_id, restarted))
            return restarted
        if joining and request.instance_id is None:
            log.info("[GroupId %s] Member %s joins the consumer group.", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        if joining and request.instance_id is not None:
            existing = group.static_member(request.instance_id)
            if existing is None:
                return ConsumerGroupMember(member_id)
            if (
                existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                and not existing.uses_classic_protocol
            ):
                raise CoordinatorError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {request.instance_id} cannot "
                    f"join the group because the instance id is owned by {existing.member_id} "
                    "member.",
                )
            return self.replace_static_member(group, existing, member_id, records)
        member = group.validated_member(member_id, request.instance_id)
        check_member_epoch(member, request.member_epoch, request.owned)
        return member

    def replace_static_member(
        self,
        group: ConsumerGroup,
        existing: ConsumerGroupMember,
        member_id: str,
        records: list[CoordinatorRecord],
    ) -> ConsumerGroupMember:
        """The instance comes back under a new member id and takes over the old member's
        assignment, so its partitions do not move (KIP-345)."""
        replacement = replace(
            existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
        )
        target = group.target_of(existing.member_id)
        self.remove(group, existing.member_id, records)
        self.emit(group, records, member_record(group.group_id, replacement))
        self.emit(group, records, target_assignment_record(group.group_id, member_id, target))
        self.emit(group, records, current_assignment_record(group.group_id, replacement))
        log.info(
            "[GroupId %s] Static member with instance id %s re-joins as member %s.",
            group.group_id,
            existing.instance_id,
            member_id,
        )
        return replacement

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: OwnedPartitions | None,
        records: list[CoordinatorRecord],
    ) -> ConsumerGroupMember:
        subscribed = member_topic_ids(group, member, self._image().topics)
        if member.is_reconciled_to(group.assignment_epoch) and all(
            topic_id in subscribed for topic_id in member.assigned_partitions
        ):
            return member
        updated = reconcile(
            member,
            group.assignment_epoch,
            group.target_of(member.member_id),
            group.partition_epoch,
            owned,
            subscribed,
        )
        if updated == member:
            return member
        self.emit(group, records, current_assignment_record(group.group_id, updated))
        if not updated.uses_classic_protocol:
            # A classic member has join and sync timers instead (classic_members.py).
            self._follow_revocation(group.group_id, updated)
        return updated

    # -- leaving and fencing -------------------------------------------------------------------

    def _leave(
        self, request: HeartbeatRequest, group: ConsumerGroup, records: list[CoordinatorRecord]
    ) -> HeartbeatResult:
        member = group.validated_member(request.member_id, request.instance_id)
        # Epoch -2 comes with an instance id (validate checks it): a static member.
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It will be back: its partitions stay its own until its session expires.
            leaving = replace(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                partitions_pending_revocation={},
            )
            self.emit(group, records, current_assignment_record(group.group_id, leaving))
            log.info(
                "[GroupId %s] Static member %s with instance id %s temporarily left.",
                group.group_id,
                member.member_id,
                request.instance_id,
            )
            return HeartbeatResult(
                ErrorCode.none,
                member_id=member.member_id,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            )
        log.info(
            "[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id
        )
        self.fence(group, member.member_id, records)
        return HeartbeatResult(
            ErrorCode.none, member_id=request.member_id, member_epoch=request.member_epoch
        )

    def fence(self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord]) -> None:
        """Remove the member and bump the group epoch, so the others get its partitions; or,
        when only classic members remain, turn the group into a classic group."""
        if self.downgrade is not None and self.downgrade(group, member_id, records):
            self.forget([group.group_id])
            return
        self.remove(group, member_id, records)
        self.bump_group_epoch(group, records)

    def bump_group_epoch(self, group: ConsumerGroup, records: list[CoordinatorRecord]) -> None:
        """Members left: a new epoch, with the digest of the topics the rest subscribe to."""
        _, new_hash = self.subscription_metadata(group)
        self.emit(group, records, epoch_record(group.group_id, group.group_epoch + 1, new_hash))

    def remove(
        self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord]
    ) -> None:
        for record in member_tombstones(group.group_id, member_id):
            self.emit(group, records, record)
        self.cancel_timers(group.group_id, member_id)

    def expire(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info(
            "[GroupId %s] Member %s fenced from the group because of %s.", group_id, member_id, why
        )
        records: list[CoordinatorRecord] = []
        self.fence(group, member_id, records)
        self.spawn_write(group_id, records)

    def _expire_revocation(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if (
            member is not None
            and member.state is MemberState.UNREVOKED_PARTITIONS
            and member.member_epoch == epoch
        ):
            self.expire(group_id, member_id, "its rebalance timeout (partitions not revoked)")

    def spawn_write(self, group_id: str, records: list[CoordinatorRecord]) -> None:
        task = asyncio.ensure_future(self.write(group_id, records))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # -- assignment ----------------------------------------------------------------------------

    def _refresh_regexes(self, group: ConsumerGroup, records: list[CoordinatorRecord]) -> None:
        """Resolve regexes new to the group, and all of them again after a metadata change."""
        in_use = group.regexes_in_use()
        stale = self._resolved_at.get(group.group_id) != self._metadata_generation
        names = list(self._image().topics)
        now = self._clock.now_ms()
        for pattern in sorted(in_use):
            known = group.resolved_regexes.get(pattern)
            if known is not None and not stale:
                continue
            topics = resolve_regex(pattern, names)
            if known is None or known.topics != topics:
                self.emit(
                    group,
                    records,
                    (
                        ConsumerGroupRegularExpressionKey(
                            group_id=group.group_id, regular_expression=pattern
                        ),
                        ConsumerGroupRegularExpressionValue(
                            topics=tuple(sorted(topics)),
                            version=self._metadata_generation,
                            timestamp=now,
                        ),
                    ),
                )
        for pattern in sorted(set(group.resolved_regexes) - in_use):
            self.emit(
                group,
                records,
                (
                    ConsumerGroupRegularExpressionKey(
                        group_id=group.group_id, regular_expression=pattern
                    ),
                    None,
                ),
            )
        self._resolved_at[group.group_id] = self._metadata_generation

    def subscription_metadata(
        self, group: ConsumerGroup
    ) -> tuple[dict[uuid.UUID, SubscribedTopic], int]:
        """The group's subscribed topics that exist, and their digest; cached until a
        subscription or the metadata changes."""
        version = (self._metadata_generation, group.subscription_version)
        cached = self._metadata_cache.get(group.group_id)
        if cached is None or cached[0] != version:
            topics = subscribed_topics(group.subscribed_topic_names(), self._image().topics)
            cached = (version, topics, metadata_hash(topics))
            self._metadata_cache[group.group_id] = cached
        return cached[1], cached[2]

    def _update_target_assignment(
        self,
        group: ConsumerGroup,
        topics: Mapping[uuid.UUID, SubscribedTopic],
        records: list[CoordinatorRecord],
    ) -> None:
        assignor = preferred_assignor(group, self.assignors)
        changed = changed_targets(group, self._image().topics, topics, assignor)
        for member_id, target in changed.items():
            self.emit(group, records, target_assignment_record(group.group_id, member_id, target))
        self.emit(group, records, assignment_epoch_record(group.group_id, group.group_epoch))

    # -- plumbing ------------------------------------------------------------------------------

    def emit(
        self, group: ConsumerGroup, records: list[CoordinatorRecord], record: CoordinatorRecord
    ) -> None:
        group.apply(record)
        records.append(record)

    def forget(self, group_ids: list[str]) -> None:
        """Drop groups (their partition was unloaded) and their timers."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            self._resolved_at.pop(group_id, None)
            self._metadata_cache.pop(group_id, None)
            if group is not None:
                for member_id in group.members:
                    self.cancel_timers(group_id, member_id)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in _MEMBER_TIMERS:
            self.timers.cancel((kind, group_id, member_id))

    def install(self, groups: list[ConsumerGroup]) -> None:
        """Groups replayed from the log: every member gets a fresh session, as in Kafka."""
        for group in groups:
            self.groups[group.group_id] = group
            for member_id, member in group.members.items():
                self.start_session(group.group_id, member_id)
                if not member.uses_classic_protocol:
                    self._follow_revocation(group.group_id, member)

    def _setting(self, group_id: str, name: str) -> int:
        """A group config (consumer.session.timeout.ms, ...) if the group has one, else the
        broker's key it overrides."""
        value = self._image().group_configs.get(group_id, {}).get(name)
        if value is not None:
            return int(value)
        if name == CONSUMER_SESSION_TIMEOUT:
            return self.config.group_consumer_session_timeout_ms
        return self.config.group_consumer_heartbeat_interval_ms

    def start_session(self, group_id: str, member_id: str) -> None:
        """(Re)start the member's session: without a heartbeat before it ends, it is fenced. A
        classic member's session is the one it asked for in its JoinGroup; a consumer member's
        is its group's consumer.session.timeout.ms."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        classic = member.classic_member_metadata if member is not None else None
        self.timers.schedule(
            ("session", group_id, member_id),
            classic.session_timeout_ms
            if classic is not None
            else self._setting(group_id, CONSUMER_SESSION_TIMEOUT),
            lambda: self.expire(group_id, member_id, "session timeout"),
        )

    def _follow_revocation(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A member asked to revoke partitions must do so within its rebalance timeout."""
        key = ("rebalance", group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.timers.cancel(key)
            return
        member_id, epoch = member.member_id, member.member_epoch
        self.timers.schedule(
            key,
            max(member.rebalance_timeout_ms, 0),
            lambda: self._expire_revocation(group_id, member_id, epoch),
        )

    def close(self) -> None:
        self.timers.cancel_all()


def _metadata_of(member: ConsumerGroupMember) -> tuple[object, ...]:
    return (
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.rebalance_timeout_ms,
        member.subscribed_topic_names,
        member.subscribed_topic_regex,
        member.server_assignor,
        member.classic_member_metadata,
    )
