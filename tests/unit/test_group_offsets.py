"""OffsetCommit / OffsetFetch / OffsetDelete and offset retention, with every error path."""

from __future__ import annotations

from collections.abc import Mapping

from krust.group.classic.group import GroupState
from krust.group.classic.group_manager import LeavingMember
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
    consumer_subscription,
    fast_config,
    form_stable_group,
    join_request,
    start_coordinator,
)

NONE = ErrorCode.none
MINUTE = 60_000


async def coordinator_with_topics(
    clock: FakeClock, core: FakeCore | None = None, **config: int
) -> GroupCoordinator:
    controller = FakeController()
    controller.add_topic("orders", 3)
    controller.add_topic("payments", 1)
    settings = {"offsets_retention_ms": 10 * MINUTE, "offsets_retention_check_interval_ms": MINUTE}
    settings.update(config)
    return await start_coordinator(fast_config(**settings), core, controller, clock)


async def commit(
    coordinator: GroupCoordinator,
    offsets: Mapping[tuple[str, int], tuple[int, str | None]],
    *,
    group_id: str = "group",
    member_id: str = "",
    generation_id: int = -1,
    group_instance_id: str | None = None,
    retention_time_ms: int = -1,
    api_version: int = 9,
) -> dict[tuple[str, int], ErrorCode]:
    topics: dict[str, list[PartitionCommit]] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(PartitionCommit(partition, offset, 4, metadata))
    results = await coordinator.commit_offsets(
        OffsetCommitRequest(
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            retention_time_ms,
            api_version,
            tuple((topic, tuple(commits)) for topic, commits in topics.items()),
        )
    )
    return {(topic, p): error for topic, outcomes in results for p, error in outcomes}


def fetched(
    coordinator: GroupCoordinator, group_id: str = "group", topics=None
) -> dict[tuple[str, int], tuple[int, str] | None]:
    error, result = coordinator.fetch_offsets(group_id, topics)
    assert error is NONE
    return {
        (topic, p): None if o is None else (o.offset, o.metadata)
        for topic, partitions in result
        for p, o in partitions
    }


async def advance(coordinator: GroupCoordinator, clock: FakeClock, ms: int) -> None:
    """Move time and let the expiry runs it triggered finish."""
    clock.advance(ms)
    await coordinator.idle()


@async_test
async def test_member_commits_and_fetches_offsets_with_metadata() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    results = await commit(
        coordinator,
        {("orders", 0): (10, "checkpoint-a"), ("orders", 2): (7, None), ("payments", 0): (3, "")},
        member_id=member.member_id,
        generation_id=1,
    )
    assert set(results.values()) == {NONE}
    assert fetched(coordinator, topics=[("orders", [0, 1, 2])]) == {
        ("orders", 0): (10, "checkpoint-a"),
        ("orders", 1): None,
        ("orders", 2): (7, ""),
    }
    assert fetched(coordinator) == {
        ("orders", 0): (10, "checkpoint-a"),
        ("orders", 2): (7, ""),
        ("payments", 0): (3, ""),
    }
    stored = coordinator.offsets.store.get("group", ("orders", 0))
    assert stored is not None
    assert stored.leader_epoch == 4 and stored.commit_timestamp_ms == clock.now_ms()


@async_test
async def test_later_commits_replace_earlier_ones() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    await commit(coordinator, {("orders", 0): (1, "first")})
    await commit(coordinator, {("orders", 0): (2, "second")})
    assert fetched(coordinator)[("orders", 0)] == (2, "second")


@async_test
async def test_commit_errors_for_members_generations_and_states() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    leader, follower = await form_stable_group(
        coordinator, clock, "group", 2, group_instance_ids=["i-1", "i-2"]
    )
    tp = {("orders", 0): (5, "m")}
    assert await commit(coordinator, tp, member_id=leader.member_id, generation_id=0) == {
        ("orders", 0): ErrorCode.illegal_generation
    }
    assert await commit(coordinator, tp, member_id="stranger", generation_id=1) == {
        ("orders", 0): ErrorCode.unknown_member_id
    }
    assert await commit(
        coordinator, tp, member_id="old-id", generation_id=1, group_instance_id="i-1"
    ) == {("orders", 0): ErrorCode.fenced_instance_id}
    # assign()-style commits are for groups without members.
    assert await commit(coordinator, tp) == {("orders", 0): ErrorCode.unknown_member_id}
    assert fetched(coordinator, topics=[("orders", [0])]) == {("orders", 0): None}

    # PreparingRebalance: members may still commit for the generation they have (eager revoke).
    rejoin = await begin(
        coordinator.join_group(join_request(member_id=leader.member_id, group_instance_id="i-1"))
    )
    assert coordinator.groups.groups["group"].state is GroupState.PREPARING_REBALANCE
    assert await commit(coordinator, tp, member_id=follower.member_id, generation_id=1) == {
        ("orders", 0): NONE
    }
    await begin(
        coordinator.join_group(join_request(member_id=follower.member_id, group_instance_id="i-2"))
    )
    await rejoin
    # CompletingRebalance: the new generation is known but not the assignment.
    assert coordinator.groups.groups["group"].state is GroupState.COMPLETING_REBALANCE
    assert await commit(coordinator, tp, member_id=leader.member_id, generation_id=2) == {
        ("orders", 0): ErrorCode.rebalance_in_progress
    }
    assert fetched(coordinator)[("orders", 0)] == (5, "m")


@async_test
async def test_generation_minus_one_commits_work_for_groups_without_members() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    assert await commit(coordinator, {("orders", 1): (99, "manual")}, group_id="assigner") == {
        ("orders", 1): NONE
    }
    assert fetched(coordinator, "assigner") == {("orders", 1): (99, "manual")}
    error, listed = coordinator.list_groups([], [])
    assert error is NONE
    assert [(g.group_id, g.protocol_type, g.state) for g in listed] == [("assigner", "", "Empty")]
    # A group whose members all left takes them too.
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    coordinator.leave_group("group", [LeavingMember(member.member_id, None)])
    assert await commit(coordinator, {("orders", 0): (1, None)}) == {("orders", 0): NONE}


@async_test
async def test_commit_with_a_generation_to_a_missing_group_depends_on_the_version() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    tp = {("orders", 0): (1, None)}
    assert await commit(coordinator, tp, member_id="m", generation_id=3, api_version=8) == {
        ("orders", 0): ErrorCode.illegal_generation
    }
    assert await commit(coordinator, tp, member_id="m", generation_id=3, api_version=9) == {
        ("orders", 0): ErrorCode.group_id_not_found
    }


@async_test
async def test_unknown_topics_and_partitions_fail_alone() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    results = await commit(
        coordinator,
        {("orders", 2): (1, None), ("orders", 3): (1, None), ("nope", 0): (1, None)},
    )
    assert results == {
        ("orders", 2): NONE,
        ("orders", 3): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert fetched(coordinator) == {("orders", 2): (1, "")}


@async_test
async def test_metadata_longer_than_offset_metadata_max_bytes_is_refused() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock, offset_metadata_max_bytes=8)
    results = await commit(coordinator, {("orders", 0): (1, "x" * 9), ("orders", 1): (1, "x" * 8)})
    assert results == {("orders", 0): ErrorCode.offset_metadata_too_large, ("orders", 1): NONE}


@async_test
async def test_a_failed_write_is_not_acknowledged_and_not_visible() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await coordinator_with_topics(clock, core)
    core.fail_appends = True
    assert await commit(coordinator, {("orders", 0): (5, None)}) == {
        ("orders", 0): ErrorCode.coordinator_not_available
    }
    assert fetched(coordinator, topics=[("orders", [0])]) == {("orders", 0): None}
    core.fail_appends = False
    assert await commit(coordinator, {("orders", 0): (6, None)}) == {("orders", 0): NONE}
    assert fetched(coordinator)[("orders", 0)] == (6, "")


@async_test
async def test_acknowledged_commits_are_on_disk_in_kafkas_format() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await coordinator_with_topics(clock, core)
    await commit(coordinator, {("orders", 0): (5, "meta")}, group_id="g1")
    partition = coordinator.partition_for("g1")
    [record] = core.logs[(OFFSETS_TOPIC, partition)]
    key, value = decode_record(record["key"], record["value"])
    assert key == OffsetCommitKey("g1", "orders", 0)
    assert (value.offset, value.metadata, value.leader_epoch) == (5, "meta", 4)


@async_test
async def test_concurrent_commits_are_written_in_order_in_few_batches() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await coordinator_with_topics(clock, core)
    commits = [
        await begin(commit(coordinator, {("orders", 0): (offset, None)})) for offset in range(20)
    ]
    for task in commits:
        assert await task == {("orders", 0): NONE}
    assert fetched(coordinator)[("orders", 0)] == (19, "")
    assert core.append_calls < 20


@async_test
async def test_commits_keep_a_members_session_alive() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    for _ in range(3):
        clock.advance(8000)
        assert await commit(
            coordinator, {("orders", 0): (1, None)}, member_id=member.member_id, generation_id=1
        ) == {("orders", 0): NONE}
    assert coordinator.groups.groups["group"].state is GroupState.STABLE


@async_test
async def test_offsets_of_an_empty_group_expire_counting_from_when_it_became_empty() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await coordinator_with_topics(clock, core)
    (member,) = await form_stable_group(
        coordinator, clock, "group", 1, session_timeout_ms=30 * MINUTE
    )
    await commit(
        coordinator, {("orders", 0): (5, None)}, member_id=member.member_id, generation_id=1
    )
    await advance(coordinator, clock, 20 * MINUTE)  # a live group keeps its offsets
    assert fetched(coordinator)[("orders", 0)] == (5, "")
    coordinator.leave_group("group", [LeavingMember(member.member_id, None)])
    await advance(coordinator, clock, 9 * MINUTE)
    assert fetched(coordinator)[("orders", 0)] == (5, "")
    await advance(coordinator, clock, 1 * MINUTE)
    assert fetched(coordinator, topics=[("orders", [0])]) == {("orders", 0): None}
    # The group went with its last offset: tombstones for both are in the log.
    assert coordinator.list_groups([], []) == (NONE, [])
    tail = [decode_record(r["key"], r["value"]) for r in core.records()[-2:]]
    assert tail == [
        (OffsetCommitKey("group", "orders", 0), None),
        (GroupMetadataKey("group"), None),
    ]


@async_test
async def test_offsets_of_a_simple_group_expire_counting_from_the_commit() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    await commit(coordinator, {("orders", 0): (1, None)})
    await advance(coordinator, clock, 5 * MINUTE)
    await commit(coordinator, {("orders", 1): (1, None)})
    await advance(coordinator, clock, 5 * MINUTE)
    assert fetched(coordinator) == {("orders", 1): (1, "")}
    await advance(coordinator, clock, 5 * MINUTE)
    assert fetched(coordinator) == {}


@async_test
async def test_explicit_retention_time_from_old_commit_versions_is_honoured() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    await commit(
        coordinator, {("orders", 0): (1, None)}, retention_time_ms=2 * MINUTE, api_version=2
    )
    await advance(coordinator, clock, 2 * MINUTE)
    assert fetched(coordinator) == {}


@async_test
async def test_stable_consumer_group_keeps_offsets_of_subscribed_topics_only() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock, group_max_session_timeout_ms=3_600_000)
    (member,) = await form_stable_group(
        coordinator,
        clock,
        "group",
        1,
        protocols=(("range", consumer_subscription("orders")),),
        session_timeout_ms=3_600_000,
    )
    await commit(
        coordinator,
        {("orders", 0): (1, None), ("payments", 0): (1, None)},
        member_id=member.member_id,
        generation_id=1,
    )
    await advance(coordinator, clock, 10 * MINUTE)
    assert fetched(coordinator) == {("orders", 0): (1, "")}


@async_test
async def test_empty_group_without_offsets_is_deleted_by_the_next_sweep() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    coordinator.leave_group("group", [LeavingMember(member.member_id, None)])
    assert coordinator.describe_group("group").state == "Empty"
    await advance(coordinator, clock, MINUTE)
    assert coordinator.describe_group("group").state == "Dead"
    assert "group" not in coordinator.groups.groups


@async_test
async def test_offset_delete() -> None:
    clock, core = FakeClock(), FakeCore()
    coordinator = await coordinator_with_topics(clock, core)
    assert await coordinator.delete_offsets("missing", [("orders", [0])]) == (
        ErrorCode.group_id_not_found,
        [],
    )
    await commit(coordinator, {("orders", 0): (1, None), ("orders", 1): (2, None)})
    error, results = await coordinator.delete_offsets("group", [("orders", [0, 2])])
    assert error is NONE and results == [("orders", [(0, NONE), (2, NONE)])]
    assert fetched(coordinator) == {("orders", 1): (2, "")}
    assert decode_record(core.records()[-1]["key"], core.records()[-1]["value"]) == (
        OffsetCommitKey("group", "orders", 0),
        None,
    )


@async_test
async def test_offset_delete_in_a_live_consumer_group_protects_subscribed_topics() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    (member,) = await form_stable_group(
        coordinator, clock, "group", 1, protocols=(("range", consumer_subscription("orders")),)
    )
    await commit(
        coordinator,
        {("orders", 0): (1, None), ("payments", 0): (1, None)},
        member_id=member.member_id,
        generation_id=1,
    )
    error, results = await coordinator.delete_offsets("group", [("orders", [0]), ("payments", [0])])
    assert error is NONE
    assert results == [
        ("orders", [(0, ErrorCode.group_subscribed_to_topic)]),
        ("payments", [(0, NONE)]),
    ]
    assert fetched(coordinator) == {("orders", 0): (1, "")}


@async_test
async def test_offset_delete_in_a_live_non_consumer_group_is_refused() -> None:
    clock = FakeClock()
    coordinator = await coordinator_with_topics(clock)
    await form_stable_group(coordinator, clock, "group", 1, protocol_type="connect")
    assert await coordinator.delete_offsets("group", [("orders", [0])]) == (
        ErrorCode.non_empty_group,
        [],
    )
