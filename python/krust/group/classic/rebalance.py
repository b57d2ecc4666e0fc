"""Rebalance phases and their timers: initial delay, join completion, pending sync, sessions.

The timing half of the classic protocol (group_manager.py handles the requests): when the join
phase completes and who is dropped, when a session or a pending SyncGroup expires, and storing
the group's metadata record once a generation is formed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from krust.coordinator.clock import Clock, KeyedTimer
from krust.group.classic.group import ClassicGroup, GroupState
from krust.group.records import GroupMetadataValue
from krust.group.results import ErrorCode, JoinGroupResult, SyncGroupResult
from krust.group.settings import GroupCoordinatorConfig

log = logging.getLogger(__name__)

StoreGroup = Callable[[str, GroupMetadataValue | None], "asyncio.Future[None]"]
"""Append a group's metadata record (None: a tombstone); the future resolves once it is durable."""


class Rebalancer:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        groups: dict[str, ClassicGroup],
        store_group: StoreGroup,
    ) -> None:
        self._config = config
        self._clock = clock
        self._groups = groups
        self._timer = KeyedTimer(clock)
        self._store_group = store_group

    def join_result(
        self, group: ClassicGroup, member_id: str, with_members: bool
    ) -> JoinGroupResult:
        return JoinGroupResult(
            ErrorCode.none,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=group.joined_members() if with_members else (),
        )

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)
        else:
            self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and group.previous_state is not GroupState.EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync_members.clear()
        self._timer.cancel(sync_key(group.group_id))
        initial_rebalance = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock.now_ms())
        if initial_rebalance:
            # group.initial.rebalance.delay.ms: let the other members of a starting group arrive
            # before the first generation, extended while they keep arriving (KIP-134).
            delay = self._config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_rebalance(group.group_id, delay, remaining)
        elif group.has_all_members_joined():
            self.complete_join(group)
        else:
            self._schedule_join_completion(group)

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        def fire() -> None:
            group = self._groups.get(group_id)
            if group is None:
                return
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                next_delay = min(self._config.group_initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_rebalance(
                    group_id, next_delay, max(remaining_ms - delay_ms, 0)
                )
            else:
                self.complete_join(group)

        self._timer.schedule(join_key(group_id), delay_ms, fire)

    def _schedule_join_completion(self, group: ClassicGroup) -> None:
        group_id = group.group_id

        def fire() -> None:
            current = self._groups.get(group_id)
            if current is not None:
                self.complete_join(current)

        self._timer.schedule(join_key(group_id), group.rebalance_timeout_ms(), fire)

    def complete_join(self, group: ClassicGroup) -> None:
        self._timer.cancel(join_key(group.group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self.drop_member(group, member.member_id, ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for session expiries to clean up.
            self._schedule_join_completion(group)
            return
        group.init_next_generation(self._clock.now_ms())
        if group.is_in(GroupState.EMPTY):
            self.persist(group, group.to_record({}), None)
            return
        for member in group.members.values():
            member.complete_join(
                self.join_result(group, member.member_id, group.is_leader(member.member_id))
            )
            self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync_expiry(group)

    def _schedule_pending_sync_expiry(self, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation_id

        def fire() -> None:
            current = self._groups.get(group_id)
            if (
                current is None
                or current.generation_id != generation
                or not current.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
                or not current.pending_sync_members
            ):
                return
            for member_id in list(current.pending_sync_members):
                self.drop_member(current, member_id, ErrorCode.unknown_member_id)
            self.prepare_rebalance(current)

        self._timer.schedule(sync_key(group_id), group.rebalance_timeout_ms(), fire)

    def reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in group.members.values():
            answered = member.complete_sync(
                SyncGroupResult(
                    error,
                    protocol_type=group.protocol_type if ok else None,
                    protocol_name=group.protocol_name if ok else None,
                    assignment=member.assignment,
                )
            )
            if answered:
                self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)

    def schedule_heartbeat(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self._timer.schedule(
            heartbeat_key(group_id, member_id),
            timeout_ms,
            lambda: self._expire_heartbeat(group_id, member_id),
        )

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if member_id in group.pending_join_members:
            group.pending_join_members.discard(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s session expired", group_id, member_id)
        self.drop_member(group, member_id, ErrorCode.unknown_member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def drop_member(self, group: ClassicGroup, member_id: str, error: ErrorCode) -> None:
        """Remove a member (or pending member), answering whatever it has parked."""
        self._timer.cancel(heartbeat_key(group.group_id, member_id))
        member = group.members.get(member_id)
        if member is not None:
            member.complete_join(join_error(error))
            member.complete_sync(SyncGroupResult(error))
        group.remove(member_id)

    def persist(
        self,
        group: ClassicGroup,
        value: GroupMetadataValue,
        on_done: Callable[[ErrorCode], None] | None,
    ) -> None:
        def done(write: asyncio.Future[None]) -> None:
            error = ErrorCode.none
            if write.cancelled() or write.exception() is not None:
                log.error(
                    "group %s: storing metadata failed: %r",
                    group.group_id,
                    None if write.cancelled() else write.exception(),
                )
                error = ErrorCode.coordinator_not_available
            if on_done is not None:
                on_done(error)

        self._store_group(group.group_id, value).add_done_callback(done)

    def cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        self._timer.cancel(heartbeat_key(group_id, member_id))

    def cancel_sync_expiry(self, group_id: str) -> None:
        self._timer.cancel(sync_key(group_id))

    def cancel_group_timers(self, group_id: str) -> None:
        self._timer.cancel(join_key(group_id))
        self._timer.cancel(sync_key(group_id))

    def cancel_all(self) -> None:
        self._timer.cancel_all()


def join_error(error: ErrorCode, member_id: str = "") -> JoinGroupResult:
    return JoinGroupResult(error, member_id=member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)
