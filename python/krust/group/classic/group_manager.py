"""The classic rebalance protocol's requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Follows Kafka's classic group coordinator: a rebalance parks every member's JoinGroup until all
known members rejoined (or the rebalance timeout removed the rest), then answers them at once with
a new generation; the leader's SyncGroup carries the assignment, which is stored in
`__consumer_offsets` before anyone receives it. Assignments are opaque bytes, so eager and
cooperative assignors both work. Everything runs on one event loop; the timeouts are in
rebalance.py.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from krust.coordinator.clock import Clock
from krust.group.classic.group import ClassicGroup, GroupState
from krust.group.classic.member import ClassicGroupMember, Protocols
from krust.group.classic.rebalance import Rebalancer, StoreGroup, join_error
from krust.group.results import CoordinatorError, ErrorCode, JoinGroupResult, SyncGroupResult
from krust.group.settings import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool
    supports_skip_assignment: bool


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode = ErrorCode.none


class GroupManager:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        store_group: StoreGroup,
    ) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self._clock = clock
        self._loop = loop
        self._rebalance = Rebalancer(config, clock, self.groups, store_group)

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest) -> asyncio.Future[JoinGroupResult]:
        future: asyncio.Future[JoinGroupResult] = self._loop.create_future()
        is_unknown_member = request.member_id == ""
        group = self.groups.get(request.group_id)
        created = group is None
        if group is None:
            if not is_unknown_member:
                future.set_result(join_error(ErrorCode.unknown_member_id, request.member_id))
                return future
            group = ClassicGroup(request.group_id, self._clock.now_ms())
            self.groups[request.group_id] = group

        if not self._accept_joining_member(group, request.member_id):
            self._rebalance.drop_member(group, request.member_id, ErrorCode.group_max_size_reached)
            future.set_result(join_error(ErrorCode.group_max_size_reached))
        elif is_unknown_member:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)

        if created and not group.members and not group.pending_join_members:
            # A first join that failed (bad protocols) must not leave a phantom group behind.
            del self.groups[group.group_id]
        return future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            # Counting parked joins (not members) lets a shrunk max size evict the last rejoiners.
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join() < limit
            )
        return member is not None or len(group.members) < limit

    def _join_new_member(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        if group.is_in(GroupState.DEAD):
            future.set_result(join_error(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, _names(request.protocols)):
            future.set_result(join_error(ErrorCode.inconsistent_group_protocol))
            return
        prefix = request.group_instance_id or request.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old_member_id = group.static_members.get(request.group_instance_id)
            if old_member_id is not None:
                self._rejoin_static_member(group, request, old_member_id, new_member_id, future)
                return
        elif request.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries cannot
            # leave a trail of half-joined members behind.
            group.pending_join_members.add(new_member_id)
            self._rebalance.schedule_heartbeat(
                group.group_id, new_member_id, request.session_timeout_ms
            )
            future.set_result(join_error(ErrorCode.member_id_required, new_member_id))
            return
        self._add_member_and_rebalance(group, request, new_member_id, future)

    def _join_existing_member(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        member_id = request.member_id
        if group.is_in(GroupState.DEAD):
            future.set_result(join_error(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(request.protocol_type, _names(request.protocols)):
            future.set_result(join_error(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_join_members:
            if request.group_instance_id is not None:
                # Static members never get MEMBER_ID_REQUIRED, so this id was not theirs.
                future.set_result(join_error(ErrorCode.unknown_member_id, member_id))
                return
            self._add_member_and_rebalance(group, request, member_id, future)
            return
        try:
            group.validate_member(member_id, request.group_instance_id)
        except CoordinatorError as refused:
            future.set_result(join_error(refused.error, member_id))
            return

        member = group.members[member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # Probably a lost JoinGroup response: answer again for the current generation.
                future.set_result(
                    self._rebalance.join_result(group, member_id, group.is_leader(member_id))
                )
            else:
                self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.STABLE):
            # A leader rejoining asks for a new assignment (e.g. topic metadata changed).
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, future)
            else:
                future.set_result(self._rebalance.join_result(group, member_id, with_members=False))
        else:
            future.set_result(join_error(ErrorCode.unknown_member_id, member_id))

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        member_id: str,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, future)
        self._rebalance.schedule_heartbeat(group.group_id, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance.maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        request: JoinGroupRequest,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        # A client that re-sends JoinGroup while the previous one is parked gets the old one
        # answered (it is no longer listening for it, but the connection must not hang).
        member.complete_join(join_error(ErrorCode.rebalance_in_progress, member.member_id))
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            future,
        )
        self._rebalance.maybe_prepare_rebalance_or_complete_join(group)

    def _rejoin_static_member(
        self,
        group: ClassicGroup,
        request: JoinGroupRequest,
        old_member_id: str,
        new_member_id: str,
        future: asyncio.Future[JoinGroupResult],
    ) -> None:
        """KIP-345: a restarted static member takes over its old identity (and assignment)."""
        instance_id = request.group_instance_id
        assert instance_id is not None
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._rebalance.cancel_heartbeat(group.group_id, old_member_id)
        self._rebalance.schedule_heartbeat(group.group_id, new_member_id, member.session_timeout_ms)
        old_settings = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            future,
        )
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._rebalance.maybe_prepare_rebalance_or_complete_join(group)
                return
            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                if error is not ErrorCode.none:
                    self._revert_static_rejoin(
                        group, instance_id, old_member_id, new_member_id, old_settings
                    )
                    if not future.done():
                        future.set_result(
                            JoinGroupResult(
                                error, generation_id=generation, leader_id=previous_leader
                            )
                        )
                    return
                if not group.is_in(GroupState.STABLE) or group.generation_id != generation:
                    return  # a rebalance started meanwhile; it answers the parked JoinGroup
                is_leader = request.supports_skip_assignment and group.is_leader(new_member_id)
                # KIP-814: the leader may skip the assignment (v9+). Older clients are told the
                # previous leader id so that the rejoined leader does not reassign a stable group.
                member.complete_join(
                    JoinGroupResult(
                        ErrorCode.none,
                        member_id=new_member_id,
                        generation_id=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=(group.leader_id or "") if is_leader else previous_leader,
                        skip_assignment=is_leader,
                        members=group.joined_members() if is_leader else (),
                    )
                )

            self._rebalance.persist(group, group.to_record(group.assignments()), stored)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self._rebalance.prepare_rebalance(group)
        else:
            self._rebalance.maybe_complete_join_phase(group)

    def _revert_static_rejoin(
        self,
        group: ClassicGroup,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        old_settings: tuple[Protocols, int, int],
    ) -> None:
        if group.static_members.get(instance_id) != new_member_id:
            return
        member = group.members[new_member_id]
        group.update_member(member, *old_settings, None)
        restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
        self._rebalance.cancel_heartbeat(group.group_id, new_member_id)
        self._rebalance.schedule_heartbeat(
            group.group_id, old_member_id, restored.session_timeout_ms
        )

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(self, request: SyncGroupRequest) -> asyncio.Future[SyncGroupResult]:
        future: asyncio.Future[SyncGroupResult] = self._loop.create_future()
        group = self.groups.get(request.group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            future.set_result(SyncGroupResult(ErrorCode.unknown_member_id))
            return future
        error = self._validate_sync(group, request)
        if error is not ErrorCode.none:
            future.set_result(SyncGroupResult(error))
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            future.set_result(SyncGroupResult(ErrorCode.rebalance_in_progress))
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            member = group.members[request.member_id]
            member.complete_sync(SyncGroupResult(ErrorCode.rebalance_in_progress))
            member.sync_future = future
            self._remove_pending_sync_member(group, request.member_id)
            if group.is_leader(request.member_id):
                self._store_assignment(group, request)
        else:
            self._remove_pending_sync_member(group, request.member_id)
            member = group.members[request.member_id]
            future.set_result(
                SyncGroupResult(
                    ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
                )
            )
        return future

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        try:
            group.validate_member(request.member_id, request.group_instance_id)
        except CoordinatorError as refused:
            return refused.error
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    def _store_assignment(self, group: ClassicGroup, request: SyncGroupRequest) -> None:
        assignment = {
            member_id: request.assignments.get(member_id, b"") for member_id in group.members
        }
        generation = request.generation_id

        def stored(error: ErrorCode) -> None:
            # The group may have moved on (a member joined) while the record was being written.
            if group.generation_id != generation:
                return
            if not group.is_in(GroupState.COMPLETING_REBALANCE):
                return
            if error is not ErrorCode.none:
                self._rebalance.reset_and_propagate_assignment(group, error)
                self._rebalance.maybe_prepare_rebalance_or_complete_join(group)
                return
            for member_id, member in group.members.items():
                member.assignment = assignment.get(member_id, b"")
            self._rebalance.propagate_assignment(group, ErrorCode.none)
            group.transition_to(GroupState.STABLE, self._clock.now_ms())

        self._rebalance.persist(group, group.to_record(assignment), stored)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._rebalance.cancel_sync_expiry(group.group_id)

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        try:
            group.validate_member(member_id, group_instance_id)
        except CoordinatorError as refused:
            return refused.error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self.touch_member(group, member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def touch_member(self, group: ClassicGroup, member_id: str) -> None:
        """Restart a member's session timer (heartbeats; commits in Stable/PreparingRebalance)."""
        member = group.members[member_id]
        self._rebalance.schedule_heartbeat(group.group_id, member_id, member.session_timeout_ms)

    def leave_group(
        self, group_id: str, leaving: list[LeavingMember]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [
                LeavingMember(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                for m in leaving
            ]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        results = [self._leave_one(group, m) for m in leaving]
        left = [r for r in results if r.error is ErrorCode.none]
        if left:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._rebalance.maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._rebalance.maybe_complete_join_phase(group)
        return ErrorCode.none, results

    def _leave_one(self, group: ClassicGroup, leaving: LeavingMember) -> LeavingMember:
        member_id, instance_id = leaving.member_id, leaving.group_instance_id
        if member_id == "":
            # KIP-345: an admin removes static members by instance id alone.
            known = group.static_members.get(instance_id) if instance_id is not None else None
            if known is None:
                return LeavingMember(member_id, instance_id, ErrorCode.unknown_member_id)
            self._rebalance.drop_member(group, known, ErrorCode.unknown_member_id)
            return LeavingMember(member_id, instance_id)
        if member_id in group.pending_join_members:
            self._rebalance.drop_member(group, member_id, ErrorCode.unknown_member_id)
            return LeavingMember(member_id, instance_id)
        try:
            group.validate_member(member_id, instance_id)
        except CoordinatorError as refused:
            return LeavingMember(member_id, instance_id, refused.error)
        self._rebalance.drop_member(group, member_id, ErrorCode.unknown_member_id)
        return LeavingMember(member_id, instance_id)

    # -- expiry, loading, unloading ------------------------------------------------------------

    def on_groups_loaded(self, groups: list[ClassicGroup]) -> None:
        """Start session timers for loaded members; shrink groups above a lowered group.max.size."""
        for group in groups:
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._rebalance.schedule_heartbeat(
                    group.group_id, member.member_id, member.session_timeout_ms
                )
            if len(group.members) > self.config.group_max_size:
                self._rebalance.prepare_rebalance(group)

    def adopt(self, group: ClassicGroup, rebalance: bool) -> None:
        """A consumer group that just became this classic group (KIP-848's downgrade): its
        members' sessions start and, if `rebalance`, a rebalance begins so that they rejoin."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._rebalance.schedule_heartbeat(
                group.group_id, member.member_id, member.session_timeout_ms
            )
        if rebalance:
            self._rebalance.prepare_rebalance(group)

    def unload(self, group_ids: list[str], error: ErrorCode) -> None:
        """Forget groups (partition moved elsewhere): answer parked requests, stop their timers."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is None:
                continue
            for member_id in list(group.members) + list(group.pending_join_members):
                self._rebalance.drop_member(group, member_id, error)
            self._rebalance.cancel_group_timers(group_id)
            group.transition_to(GroupState.DEAD, self._clock.now_ms())

    def mark_dead(self, group: ClassicGroup) -> None:
        group.transition_to(GroupState.DEAD, self._clock.now_ms())

    def close(self) -> None:
        self.unload(list(self.groups), ErrorCode.not_coordinator)
        self._rebalance.cancel_all()


def _names(protocols: Protocols) -> list[str]:
    return [name for name, _ in protocols]


def _inconsistent(requested: str | None, actual: str | None) -> bool:
    return requested is not None and actual is not None and requested != actual
