"""ListGroups, DescribeGroups and DeleteGroups as kafka-consumer-groups.sh would use them."""

from __future__ import annotations

from krust.group.coordinator import GroupCoordinator
from krust.group.offset_manager import OffsetCommitRequest, PartitionCommit
from krust.group.records import OFFSETS_TOPIC, GroupMetadataKey, OffsetCommitKey, decode_record
from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeController,
    FakeCore,
    async_test,
    begin,
    form_stable_group,
    join_request,
    start_coordinator,
)

NONE = ErrorCode.none


async def groups_in_every_state(clock: FakeClock, core: FakeCore) -> GroupCoordinator:
    """stable (Stable), rebalancing (PreparingRebalance), simple (Empty, offsets only)."""
    controller = FakeController()
    controller.add_topic("orders", 1)
    coordinator = await start_coordinator(core=core, controller=controller, clock=clock)
    await form_stable_group(coordinator, clock, "stable", 2)
    leader, _ = await form_stable_group(coordinator, clock, "rebalancing", 2)
    await begin(coordinator.join_group(join_request("rebalancing", member_id=leader.member_id)))
    await coordinator.commit_offsets(
        OffsetCommitRequest(
            "simple", "", None, -1, -1, 9, (("orders", (PartitionCommit(0, 5, -1, None),)),)
        )
    )
    return coordinator


def listed(coordinator: GroupCoordinator, states=(), types=()) -> set[tuple[str, str, str]]:
    error, groups = coordinator.list_groups(list(states), list(types))
    assert error is NONE
    assert {g.group_type for g in groups} <= {"classic"}
    return {(g.group_id, g.state, g.protocol_type) for g in groups}


@async_test
async def test_list_groups_with_and_without_state_filters() -> None:
    clock = FakeClock()
    coordinator = await groups_in_every_state(clock, FakeCore())
    assert listed(coordinator) == {
        ("stable", "Stable", "consumer"),
        ("rebalancing", "PreparingRebalance", "consumer"),
        ("simple", "Empty", ""),
    }
    # Kafka matches states case-insensitively.
    assert listed(coordinator, ["Stable", "empty"]) == {
        ("stable", "Stable", "consumer"),
        ("simple", "Empty", ""),
    }
    assert listed(coordinator, ["preparingrebalance"]) == {
        ("rebalancing", "PreparingRebalance", "consumer")
    }
    assert listed(coordinator, ["Dead"]) == set()


@async_test
async def test_list_groups_type_filter() -> None:
    clock = FakeClock()
    coordinator = await groups_in_every_state(clock, FakeCore())
    assert len(listed(coordinator, types=["Classic"])) == 3
    assert listed(coordinator, types=["consumer"]) == set()


@async_test
async def test_describe_stable_group_shows_members_metadata_and_assignments() -> None:
    clock = FakeClock()
    coordinator = await groups_in_every_state(clock, FakeCore())
    described = coordinator.describe_group("stable")
    assert (described.error, described.state, described.protocol_type) == (
        NONE,
        "Stable",
        "consumer",
    )
    assert described.protocol_data == "range"
    assert [(m.client_id, m.client_host, m.metadata, m.assignment) for m in described.members] == [
        ("client-0", "/127.0.0.1", b"range-metadata", b"assignment-0"),
        ("client-1", "/127.0.0.1", b"range-metadata", b"assignment-1"),
    ]


@async_test
async def test_describe_rebalancing_group_hides_metadata_and_assignments() -> None:
    clock = FakeClock()
    coordinator = await groups_in_every_state(clock, FakeCore())
    described = coordinator.describe_group("rebalancing")
    assert described.state == "PreparingRebalance" and described.protocol_data == ""
    assert len(described.members) == 2
    assert all(m.metadata == b"" and m.assignment == b"" for m in described.members)


@async_test
async def test_describe_unknown_group_reports_it_dead() -> None:
    coordinator = await start_coordinator()
    described = coordinator.describe_group("nobody")
    assert (described.error, described.state, described.members) == (NONE, "Dead", ())


@async_test
async def test_delete_groups_checks_each_group() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await groups_in_every_state(clock, core)
    results = await coordinator.delete_groups(["stable", "missing", "", "simple", "simple"])
    assert results == [
        ("stable", ErrorCode.non_empty_group),
        ("missing", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
        ("simple", NONE),
        ("simple", ErrorCode.group_id_not_found),
    ]
    assert {g for g, _, _ in listed(coordinator)} == {"stable", "rebalancing"}
    error, offsets = coordinator.fetch_offsets("simple", [("orders", [0])])
    assert error is NONE and offsets == [("orders", [(0, None)])]
    partition = coordinator.partition_for("simple")
    tail = core.logs[(OFFSETS_TOPIC, partition)][-2:]
    assert [decode_record(r["key"], r["value"]) for r in tail] == [
        (OffsetCommitKey("simple", "orders", 0), None),
        (GroupMetadataKey("simple"), None),
    ]


@async_test
async def test_a_deleted_group_id_can_be_used_again() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    clock.advance(10_000)  # session expiry empties it
    assert await coordinator.delete_groups(["group"]) == [("group", NONE)]
    assert coordinator.heartbeat("group", member.member_id, None, 2) is (
        ErrorCode.unknown_member_id
    )
    (again,) = await form_stable_group(coordinator, clock, "group", 1)
    assert again.generation_id == 1


@async_test
async def test_delete_failure_is_reported() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await groups_in_every_state(clock, core)
    core.fail_appends = True
    assert await coordinator.delete_groups(["simple"]) == [
        ("simple", ErrorCode.coordinator_not_available)
    ]
