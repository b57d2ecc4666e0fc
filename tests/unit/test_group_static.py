"""Static membership (KIP-345): restarts without rebalances, fencing, removal by instance id."""

from __future__ import annotations

from krust.group.classic.group import GroupState
from krust.group.classic.group_manager import LeavingMember
from krust.group.coordinator import GroupCoordinator
from krust.group.records import GroupMetadataKey, decode_record
from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeCore,
    async_test,
    begin,
    form_stable_group,
    join_request,
    start_coordinator,
    sync_request,
)

NONE = ErrorCode.none
INSTANCES = ["instance-a", "instance-b"]


def state(coordinator: GroupCoordinator) -> GroupState:
    return coordinator.groups.groups["group"].state


async def static_group(
    clock: FakeClock, core: FakeCore | None = None
) -> tuple[GroupCoordinator, list]:
    coordinator = await start_coordinator(core=core, clock=clock)
    members = await form_stable_group(
        coordinator, clock, "group", 2, group_instance_ids=INSTANCES, rebalance_timeout_ms=5000
    )
    return coordinator, members


@async_test
async def test_static_member_ids_start_with_the_instance_id() -> None:
    clock = FakeClock()
    _, (a, b) = await static_group(clock)
    assert a.member_id.startswith("instance-a-")
    assert b.member_id.startswith("instance-b-")


@async_test
async def test_restarted_follower_takes_over_without_a_rebalance() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator, (leader, follower) = await static_group(clock, core)
    restarted = await coordinator.join_group(join_request(group_instance_id="instance-b"))
    assert restarted.error is NONE
    assert restarted.member_id != follower.member_id
    assert restarted.member_id.startswith("instance-b-")
    assert restarted.generation_id == 1
    assert restarted.leader_id == leader.member_id
    assert restarted.members == () and not restarted.skip_assignment
    assert state(coordinator) is GroupState.STABLE
    # It keeps its assignment; the other member notices nothing.
    sync = await coordinator.sync_group(
        sync_request("group", restarted.member_id, 1, group_instance_id="instance-b")
    )
    assert sync.assignment == b"assignment-1"
    assert coordinator.heartbeat("group", leader.member_id, "instance-a", 1) is NONE
    # The new member id was stored, so a coordinator restart would know it.
    await coordinator.log.idle()
    last = decode_record(core.records()[-1]["key"], core.records()[-1]["value"])
    assert last is not None and last[0] == GroupMetadataKey("group")
    assert [m.member_id for m in last[1].members] == [leader.member_id, restarted.member_id]


@async_test
async def test_the_old_member_id_of_a_replaced_static_member_is_fenced() -> None:
    clock = FakeClock()
    coordinator, (_, follower) = await static_group(clock)
    await coordinator.join_group(join_request(group_instance_id="instance-b"))
    stale = follower.member_id
    assert coordinator.heartbeat("group", stale, "instance-b", 1) is ErrorCode.fenced_instance_id
    sync = await coordinator.sync_group(
        sync_request("group", stale, 1, group_instance_id="instance-b")
    )
    assert sync.error is ErrorCode.fenced_instance_id
    rejoin = await coordinator.join_group(
        join_request(member_id=stale, group_instance_id="instance-b")
    )
    assert rejoin.error is ErrorCode.fenced_instance_id
    error, [left] = coordinator.leave_group("group", [LeavingMember(stale, "instance-b")])
    assert error is NONE and left.error is ErrorCode.fenced_instance_id
    assert state(coordinator) is GroupState.STABLE


@async_test
async def test_unknown_instance_id_with_a_member_id_is_an_unknown_member() -> None:
    clock = FakeClock()
    coordinator, (leader, _) = await static_group(clock)
    assert coordinator.heartbeat("group", leader.member_id, "instance-z", 1) is (
        ErrorCode.unknown_member_id
    )


@async_test
async def test_restarted_leader_skips_assignment_from_v9() -> None:
    clock = FakeClock()
    coordinator, (leader, follower) = await static_group(clock)
    restarted = await coordinator.join_group(
        join_request(group_instance_id="instance-a", supports_skip_assignment=True)
    )
    assert restarted.error is NONE
    assert restarted.leader_id == restarted.member_id
    assert restarted.skip_assignment
    assert {m.member_id for m in restarted.members} == {restarted.member_id, follower.member_id}
    assert coordinator.heartbeat("group", leader.member_id, "instance-a", 1) is (
        ErrorCode.fenced_instance_id
    )
    assert state(coordinator) is GroupState.STABLE


@async_test
async def test_restarted_leader_before_v9_is_told_the_old_leader_id() -> None:
    clock = FakeClock()
    coordinator, (leader, _) = await static_group(clock)
    restarted = await coordinator.join_group(join_request(group_instance_id="instance-a"))
    # Not being told it leads, an old client does not re-assign a Stable group.
    assert restarted.leader_id == leader.member_id != restarted.member_id
    assert not restarted.skip_assignment and restarted.members == ()
    assert coordinator.groups.groups["group"].leader_id == restarted.member_id
    assert state(coordinator) is GroupState.STABLE


@async_test
async def test_static_rejoin_that_changes_the_protocol_triggers_a_rebalance() -> None:
    clock = FakeClock()
    coordinator, _ = await static_group(clock)
    restarted = await begin(
        coordinator.join_group(
            join_request(
                group_instance_id="instance-b",
                protocols=(("roundrobin", b"r"), ("range", b"g")),
                rebalance_timeout_ms=5000,
            )
        )
    )
    # Still "range" is the only common protocol, so nothing changes: no rebalance.
    assert (await restarted).generation_id == 1
    assert state(coordinator) is GroupState.STABLE
    # Once the other member also prefers roundrobin, the vote changes and a rebalance starts.
    changed = await begin(
        coordinator.join_group(
            join_request(
                group_instance_id="instance-a",
                protocols=(("roundrobin", b"r"), ("range", b"g")),
                rebalance_timeout_ms=5000,
            )
        )
    )
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    clock.advance(5000)
    result = await changed
    assert result.generation_id == 2 and result.protocol_name == "roundrobin"


@async_test
async def test_static_rejoin_during_completing_rebalance_restarts_the_rebalance() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    joins = [
        await begin(coordinator.join_group(join_request(group_instance_id=i))) for i in INSTANCES
    ]
    clock.advance(0)
    await joins[0], await joins[1]
    assert state(coordinator) is GroupState.COMPLETING_REBALANCE
    await begin(coordinator.join_group(join_request(group_instance_id="instance-b")))
    assert state(coordinator) is GroupState.PREPARING_REBALANCE


@async_test
async def test_static_members_survive_the_rebalance_timeout_until_their_session_expires() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    leader, follower = await form_stable_group(
        coordinator,
        clock,
        "group",
        2,
        group_instance_ids=INSTANCES,
        rebalance_timeout_ms=5000,
        session_timeout_ms=60_000,
    )
    rejoin = await begin(
        coordinator.join_group(
            join_request(
                member_id=leader.member_id,
                group_instance_id="instance-a",
                rebalance_timeout_ms=5000,
                session_timeout_ms=60_000,
            )
        )
    )
    clock.advance(5000)
    result = await rejoin
    # Unlike a dynamic member, the silent static member is kept for its session timeout.
    assert result.generation_id == 2
    assert {m.member_id for m in result.members} == {leader.member_id, follower.member_id}


@async_test
async def test_batch_leave_by_instance_id_removes_static_members() -> None:
    clock = FakeClock()
    coordinator, (leader, follower) = await static_group(clock)
    error, results = coordinator.leave_group(
        "group",
        [
            LeavingMember("", "instance-b"),
            LeavingMember("", "instance-unknown"),
            LeavingMember("", None),
        ],
    )
    assert error is NONE
    assert [(r.group_instance_id, r.error) for r in results] == [
        ("instance-b", NONE),
        ("instance-unknown", ErrorCode.unknown_member_id),
        (None, ErrorCode.unknown_member_id),
    ]
    assert state(coordinator) is GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat("group", follower.member_id, "instance-b", 1) is (
        ErrorCode.unknown_member_id
    )
    rejoin = await coordinator.join_group(
        join_request(member_id=leader.member_id, group_instance_id="instance-a")
    )
    assert rejoin.generation_id == 2 and len(rejoin.members) == 1


@async_test
async def test_leaving_every_static_member_at_once_empties_the_group() -> None:
    clock = FakeClock()
    coordinator, _ = await static_group(clock)
    error, results = coordinator.leave_group("group", [LeavingMember("", i) for i in INSTANCES])
    assert error is NONE and all(r.error is NONE for r in results)
    assert state(coordinator) is GroupState.EMPTY


@async_test
async def test_failed_store_of_a_static_rejoin_reverts_to_the_old_member_id() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator, (leader, follower) = await static_group(clock, core)
    core.fail_appends = True
    refused = await coordinator.join_group(join_request(group_instance_id="instance-b"))
    assert refused.error is ErrorCode.coordinator_not_available
    core.fail_appends = False
    assert coordinator.heartbeat("group", follower.member_id, "instance-b", 1) is NONE
    assert coordinator.heartbeat("group", leader.member_id, "instance-a", 1) is NONE
    assert state(coordinator) is GroupState.STABLE
