"""The classic rebalance protocol as a client sees it: JoinGroup, SyncGroup, Heartbeat, timeouts."""

from __future__ import annotations

from krust.group.classic.group import GroupState
from krust.group.classic.group_manager import LeavingMember
from krust.group.coordinator import GroupCoordinator
from krust.group.results import ErrorCode, JoinGroupResult

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeCore,
    async_test,
    begin,
    fast_config,
    form_stable_group,
    join_request,
    start_coordinator,
    sync_request,
)

NONE = ErrorCode.none


def state(coordinator: GroupCoordinator, group_id: str = "group") -> GroupState:
    return coordinator.groups.groups[group_id].state


def heartbeat(
    coordinator: GroupCoordinator, result: JoinGroupResult, group_id: str = "group"
) -> ErrorCode:
    return coordinator.heartbeat(group_id, result.member_id, None, result.generation_id)


@async_test
async def test_single_member_joins_leads_and_gets_its_assignment() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    join = await begin(coordinator.join_group(join_request()))
    assert not join.done()  # the first rebalance waits for group.initial.rebalance.delay.ms
    clock.advance(0)
    result = await join
    assert result.error is NONE
    assert result.generation_id == 1
    assert result.leader_id == result.member_id
    assert result.member_id.startswith("client-")
    assert result.protocol_type == "consumer"
    assert result.protocol_name == "range"
    assert [m.member_id for m in result.members] == [result.member_id]
    assert result.members[0].metadata == b"range-metadata"
    assert state(coordinator) is GroupState.COMPLETING_REBALANCE

    sync = await coordinator.sync_group(
        sync_request("group", result.member_id, 1, {result.member_id: b"partitions-0-1"})
    )
    assert sync.error is NONE
    assert sync.assignment == b"partitions-0-1"
    assert sync.protocol_name == "range"
    assert state(coordinator) is GroupState.STABLE
    assert heartbeat(coordinator, result) is NONE


@async_test
async def test_three_members_share_one_generation_and_only_the_leader_sees_members() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    results = await form_stable_group(coordinator, clock, "group", 3)
    leader = results[0].member_id
    assert {r.generation_id for r in results} == {1}
    assert {r.leader_id for r in results} == {leader}
    assert len(results[0].members) == 3
    assert results[1].members == () and results[2].members == ()
    for index, result in enumerate(results):
        sync = await coordinator.sync_group(sync_request("group", result.member_id, 1))
        assert sync.assignment == f"assignment-{index}".encode()
    assert state(coordinator) is GroupState.STABLE


@async_test
async def test_followers_sync_before_the_leader_wait_for_its_assignment() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [await begin(coordinator.join_group(join_request(client_id=c))) for c in "ab"]
    clock.advance(0)
    leader, follower = [await j for j in joins]
    waiting = await begin(coordinator.sync_group(sync_request("group", follower.member_id, 1)))
    assert not waiting.done()
    assignments = {leader.member_id: b"L", follower.member_id: b"F"}
    assert (
        await coordinator.sync_group(sync_request("group", leader.member_id, 1, assignments))
    ).assignment == b"L"
    assert (await waiting).assignment == b"F"


@async_test
async def test_members_left_out_by_the_leader_get_an_empty_assignment() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [await begin(coordinator.join_group(join_request(client_id=c))) for c in "ab"]
    clock.advance(0)
    leader, follower = [await j for j in joins]
    await coordinator.sync_group(
        sync_request("group", leader.member_id, 1, {leader.member_id: b"x"})
    )
    sync = await coordinator.sync_group(sync_request("group", follower.member_id, 1))
    assert sync.error is NONE and sync.assignment == b""


@async_test
async def test_protocol_is_chosen_by_vote_among_the_common_protocols() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    preferences = [
        (("roundrobin", b"r1"), ("range", b"g1"), ("sticky", b"s1")),
        (("roundrobin", b"r2"), ("range", b"g2")),
        (("range", b"g3"), ("roundrobin", b"r3")),
    ]
    joins = [
        await begin(coordinator.join_group(join_request(protocols=p, client_id=f"c{i}")))
        for i, p in enumerate(preferences)
    ]
    clock.advance(0)
    results = [await j for j in joins]
    # sticky is not common; roundrobin has two votes, range one.
    assert {r.protocol_name for r in results} == {"roundrobin"}
    assert [m.metadata for m in results[0].members] == [b"r1", b"r2", b"r3"]


@async_test
async def test_member_without_a_common_protocol_is_refused_and_the_group_is_untouched() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    refused = await coordinator.join_group(join_request(protocols=(("sticky", b""),)))
    assert refused.error is ErrorCode.inconsistent_group_protocol
    other_type = await coordinator.join_group(join_request(protocol_type="connect"))
    assert other_type.error is ErrorCode.inconsistent_group_protocol
    assert state(coordinator) is GroupState.STABLE
    assert heartbeat(coordinator, member) is NONE


@async_test
async def test_empty_protocol_list_is_refused_and_leaves_no_group_behind() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    refused = await coordinator.join_group(join_request(protocols=()))
    assert refused.error is ErrorCode.inconsistent_group_protocol
    no_type = await coordinator.join_group(join_request(protocol_type=""))
    assert no_type.error is ErrorCode.inconsistent_group_protocol
    assert coordinator.list_groups([], []) == (NONE, [])
    # The same group id still works with a proper request.
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    assert member.generation_id == 1


@async_test
async def test_member_id_required_on_first_join_from_v4() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    first = await coordinator.join_group(join_request(require_known_member_id=True))
    assert first.error is ErrorCode.member_id_required
    assert first.member_id.startswith("client-")
    join = await begin(
        coordinator.join_group(
            join_request(member_id=first.member_id, require_known_member_id=True)
        )
    )
    clock.advance(0)
    result = await join
    assert result.error is NONE
    assert result.member_id == first.member_id == result.leader_id


@async_test
async def test_pending_member_that_never_rejoins_expires_after_its_session_timeout() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1, session_timeout_ms=60_000)
    first = await coordinator.join_group(
        join_request(require_known_member_id=True, session_timeout_ms=10_000)
    )
    group = coordinator.groups.groups["group"]
    assert first.member_id in group.pending_join_members
    clock.advance(10_000)
    assert first.member_id not in group.pending_join_members
    late = await coordinator.join_group(join_request(member_id=first.member_id))
    assert late.error is ErrorCode.unknown_member_id
    assert heartbeat(coordinator, member) is NONE


@async_test
async def test_initial_rebalance_delay_is_extended_while_members_keep_joining() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(
        fast_config(group_initial_rebalance_delay_ms=3000), clock=clock
    )
    first = await begin(coordinator.join_group(join_request(client_id="a")))
    clock.advance(2000)
    second = await begin(coordinator.join_group(join_request(client_id="b")))
    clock.advance(1000)  # 3 s: a member arrived during the delay, so wait another delay
    assert not first.done()
    clock.advance(2999)
    assert not first.done() and not second.done()
    clock.advance(1)  # 6 s: nobody new in the last delay
    results = [await first, await second]
    assert {r.generation_id for r in results} == {1}
    assert len(results[0].members) == 2


@async_test
async def test_initial_rebalance_delay_never_exceeds_the_rebalance_timeout() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(
        fast_config(group_initial_rebalance_delay_ms=3000), clock=clock
    )
    started = clock.now_ms()
    joins = [await begin(coordinator.join_group(join_request(rebalance_timeout_ms=7000)))]
    while clock.now_ms() - started < 20_000:
        clock.advance(1000)
        if state(coordinator) is not GroupState.PREPARING_REBALANCE:
            break
        joins.append(await begin(coordinator.join_group(join_request(rebalance_timeout_ms=7000))))
    # A new member every second would extend the delay forever; the rebalance timeout caps it.
    assert clock.now_ms() - started == 7000
    results = [await j for j in joins]
    assert {r.generation_id for r in results} == {1}
    assert len(results[0].members) == 7


@async_test
async def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(
        coordinator, clock, "group", 2, session_timeout_ms=120_000, rebalance_timeout_ms=5000
    )
    newcomer = await begin(
        coordinator.join_group(join_request(client_id="new", rebalance_timeout_ms=5000))
    )
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    assert heartbeat(coordinator, follower) is ErrorCode.rebalance_in_progress
    rejoin = await begin(
        coordinator.join_group(join_request(member_id=leader.member_id, rebalance_timeout_ms=5000))
    )
    clock.advance(4999)
    assert not rejoin.done()
    clock.advance(1)
    results = [await rejoin, await newcomer]
    assert {r.generation_id for r in results} == {2}
    assert results[0].leader_id == leader.member_id
    assert {m.member_id for m in results[0].members} == {leader.member_id, results[1].member_id}
    assert heartbeat(coordinator, follower) is ErrorCode.unknown_member_id


@async_test
async def test_a_new_leader_is_elected_when_the_leader_does_not_rejoin() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(
        coordinator, clock, "group", 2, session_timeout_ms=120_000, rebalance_timeout_ms=5000
    )
    rejoin = await begin(
        coordinator.join_group(
            join_request(
                member_id=follower.member_id,
                protocols=(("range", b"changed"),),
                rebalance_timeout_ms=5000,
            )
        )
    )
    clock.advance(5000)
    result = await rejoin
    assert result.generation_id == 2
    assert result.leader_id == follower.member_id
    assert [m.member_id for m in result.members] == [follower.member_id]
    assert [m.metadata for m in result.members] == [b"changed"]
    assert heartbeat(coordinator, leader) is ErrorCode.unknown_member_id


@async_test
async def test_session_expiry_removes_the_member_and_rebalances() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(coordinator, clock, "group", 2)
    for _ in range(2):
        clock.advance(4000)
        assert heartbeat(coordinator, leader) is NONE
    clock.advance(4000)
    # 12 s without a heartbeat from the follower (session timeout 10 s): it is gone.
    assert heartbeat(coordinator, leader) is ErrorCode.rebalance_in_progress
    assert heartbeat(coordinator, follower) is ErrorCode.unknown_member_id
    rejoin = await coordinator.join_group(join_request(member_id=leader.member_id))
    assert rejoin.generation_id == 2
    assert [m.member_id for m in rejoin.members] == [leader.member_id]


@async_test
async def test_last_member_expiring_leaves_an_empty_group_that_is_stored() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    await form_stable_group(coordinator, clock, "group", 1)
    clock.advance(10_000)
    assert state(coordinator) is GroupState.EMPTY
    assert coordinator.groups.groups["group"].generation_id == 2
    await coordinator.log.idle()
    described = coordinator.describe_group("group")
    assert described.state == "Empty" and described.members == ()


@async_test
async def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [
        await begin(coordinator.join_group(join_request(client_id=c, rebalance_timeout_ms=5000)))
        for c in "ab"
    ]
    clock.advance(0)
    leader, silent = [await j for j in joins]
    await coordinator.sync_group(sync_request("group", leader.member_id, 1, {}))
    assert heartbeat(coordinator, leader) is NONE
    clock.advance(5000)
    assert heartbeat(coordinator, silent) is ErrorCode.unknown_member_id
    assert heartbeat(coordinator, leader) is ErrorCode.rebalance_in_progress


@async_test
async def test_a_join_during_completing_rebalance_restarts_it_and_waiting_syncs_are_told() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [await begin(coordinator.join_group(join_request(client_id=c))) for c in "ab"]
    clock.advance(0)
    leader, follower = [await j for j in joins]
    waiting = await begin(coordinator.sync_group(sync_request("group", follower.member_id, 1)))
    newcomer = await begin(coordinator.join_group(join_request(client_id="c")))
    assert (await waiting).error is ErrorCode.rebalance_in_progress
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    late_sync = await coordinator.sync_group(sync_request("group", leader.member_id, 1, {}))
    assert late_sync.error is ErrorCode.rebalance_in_progress
    rejoins = [
        await begin(coordinator.join_group(join_request(member_id=m.member_id)))
        for m in (leader, follower)
    ]
    results = [await r for r in rejoins] + [await newcomer]
    assert {r.generation_id for r in results} == {2}


@async_test
async def test_rejoin_during_completing_rebalance_with_same_metadata_repeats_the_answer() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [await begin(coordinator.join_group(join_request(client_id=c))) for c in "ab"]
    clock.advance(0)
    leader, _ = [await j for j in joins]
    again = await coordinator.join_group(join_request(member_id=leader.member_id))
    assert again.generation_id == 1 and len(again.members) == 2
    assert state(coordinator) is GroupState.COMPLETING_REBALANCE


@async_test
async def test_stable_follower_rejoining_unchanged_gets_the_current_generation() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(coordinator, clock, "group", 2)
    again = await coordinator.join_group(join_request(member_id=follower.member_id))
    assert again.error is NONE and again.generation_id == 1 and again.members == ()
    assert state(coordinator) is GroupState.STABLE
    # The leader rejoining asks for a new assignment: a rebalance.
    await begin(coordinator.join_group(join_request(member_id=leader.member_id)))
    assert state(coordinator) is GroupState.PREPARING_REBALANCE


@async_test
async def test_session_timeout_outside_the_broker_bounds_is_refused() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    for timeout in (5999, 1_800_001):
        refused = await coordinator.join_group(join_request(session_timeout_ms=timeout))
        assert refused.error is ErrorCode.invalid_session_timeout
    assert state(coordinator) is GroupState.STABLE
    assert heartbeat(coordinator, member) is NONE


@async_test
async def test_group_max_size_refuses_extra_members() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(fast_config(group_max_size=2), clock=clock)
    members = await form_stable_group(coordinator, clock, "group", 2)
    refused = await coordinator.join_group(join_request(client_id="third"))
    assert refused.error is ErrorCode.group_max_size_reached
    assert state(coordinator) is GroupState.STABLE
    assert all(heartbeat(coordinator, m) is NONE for m in members)


@async_test
async def test_sync_and_heartbeat_errors() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(coordinator, clock, "group", 2)
    stranger = await coordinator.sync_group(sync_request("group", "nobody", 1))
    assert stranger.error is ErrorCode.unknown_member_id
    stale = await coordinator.sync_group(sync_request("group", follower.member_id, 0))
    assert stale.error is ErrorCode.illegal_generation
    wrong_protocol = await coordinator.sync_group(
        sync_request("group", follower.member_id, 1, protocol_name="roundrobin")
    )
    assert wrong_protocol.error is ErrorCode.inconsistent_group_protocol
    missing = await coordinator.sync_group(sync_request("no-such-group", "m", 1))
    assert missing.error is ErrorCode.unknown_member_id
    assert coordinator.heartbeat("group", follower.member_id, None, 7) is (
        ErrorCode.illegal_generation
    )
    assert coordinator.heartbeat("no-such-group", "m", None, 1) is ErrorCode.unknown_member_id
    assert coordinator.heartbeat("", "m", None, 1) is ErrorCode.invalid_group_id
    # None of that disturbed the group.
    assert state(coordinator) is GroupState.STABLE
    assert heartbeat(coordinator, leader) is NONE


@async_test
async def test_join_with_unknown_member_id_for_missing_group_is_refused() -> None:
    coordinator = await start_coordinator()
    result = await coordinator.join_group(join_request(member_id="ghost"))
    assert result.error is ErrorCode.unknown_member_id
    assert (await coordinator.join_group(join_request(group_id=""))).error is (
        ErrorCode.invalid_group_id
    )


@async_test
async def test_leave_rebalances_the_remaining_members() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(coordinator, clock, "group", 2)
    error, members = coordinator.leave_group(
        "group",
        [_leaving(leader.member_id), _leaving("unknown-member")],
    )
    assert error is NONE
    assert [m.error for m in members] == [NONE, ErrorCode.unknown_member_id]
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    rejoin = await coordinator.join_group(join_request(member_id=follower.member_id))
    assert rejoin.generation_id == 2 and rejoin.leader_id == follower.member_id


@async_test
async def test_leave_of_the_last_member_empties_the_group() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    error, [left] = coordinator.leave_group("group", [_leaving(member.member_id)])
    assert error is NONE and left.error is NONE
    assert state(coordinator) is GroupState.EMPTY


@async_test
async def test_leave_from_a_missing_group_reports_unknown_members() -> None:
    coordinator = await start_coordinator()
    error, [result] = coordinator.leave_group("nothing", [_leaving("m")])
    assert error is NONE and result.error is ErrorCode.unknown_member_id


@async_test
async def test_storage_failure_on_sync_is_reported_and_the_group_rebalances() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await start_coordinator(core=core, clock=clock)
    join = await begin(coordinator.join_group(join_request()))
    clock.advance(0)
    member = await join
    core.fail_appends = True
    sync = await coordinator.sync_group(sync_request("group", member.member_id, 1, {}))
    assert sync.error is ErrorCode.coordinator_not_available
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    core.fail_appends = False
    rejoin = await coordinator.join_group(join_request(member_id=member.member_id))
    assert rejoin.generation_id == 2
    ok = await coordinator.sync_group(sync_request("group", member.member_id, 2, {}))
    assert ok.error is NONE


def _leaving(member_id: str) -> LeavingMember:
    return LeavingMember(member_id, None)


@async_test
async def test_cooperative_rebalances_are_just_consecutive_generations() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    sticky = (("cooperative-sticky", b"owned:p0,p1"),)
    (first,) = await form_stable_group(coordinator, clock, "group", 1, protocols=sticky)
    newcomer = await begin(
        coordinator.join_group(
            join_request(client_id="b", protocols=(("cooperative-sticky", b""),))
        )
    )
    rejoin = await begin(
        coordinator.join_group(join_request(member_id=first.member_id, protocols=sticky))
    )
    leader, follower = await rejoin, await newcomer
    assert leader.generation_id == follower.generation_id == 2
    # Round 1: the leader only revokes p1 from itself; the assignment bytes are opaque to us.
    assignments = {leader.member_id: b"p0", follower.member_id: b""}
    await coordinator.sync_group(sync_request("group", leader.member_id, 2, assignments))
    assert (
        await coordinator.sync_group(sync_request("group", follower.member_id, 2))
    ).assignment == b""
    # Round 2: the leader rejoins at once with what it owns now; p1 goes to the newcomer.
    rounds = [
        await begin(coordinator.join_group(join_request(member_id=m.member_id, protocols=p)))
        for m, p in ((leader, (("cooperative-sticky", b"owned:p0"),)), (follower, sticky))
    ]
    results = [await r for r in rounds]
    assert {r.generation_id for r in results} == {3}
    assignments = {leader.member_id: b"p0", follower.member_id: b"p1"}
    await coordinator.sync_group(sync_request("group", leader.member_id, 3, assignments))
    synced = await coordinator.sync_group(sync_request("group", follower.member_id, 3))
    assert synced.assignment == b"p1"
    assert state(coordinator) is GroupState.STABLE


@async_test
async def test_a_new_members_parked_join_times_out_after_five_minutes() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    slow = {"rebalance_timeout_ms": 600_000, "session_timeout_ms": 60_000}
    (member,) = await form_stable_group(coordinator, clock, "group", 1, **slow)
    newcomer = await begin(coordinator.join_group(join_request(client_id="new", **slow)))
    for _ in range(10):
        clock.advance(30_000)
        assert heartbeat(coordinator, member) is ErrorCode.rebalance_in_progress
    result = await newcomer
    assert result.error is ErrorCode.unknown_member_id
    assert "new" not in {m.client_id for m in coordinator.groups.groups["group"].members.values()}
