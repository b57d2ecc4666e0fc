"""Offsets of KIP-848 consumer groups: commits and fetches checked against member epochs,
retention, DeleteGroups and ListGroups, on a fake clock."""

from __future__ import annotations

import asyncio

from krust.group.offset_manager import OffsetCommitRequest, PartitionCommit
from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.consumer_group import ConsumerGroupDriver, new_group
from .doubles.group import FakeCore, async_test, fast_config, start_coordinator

NONE = ErrorCode.none
MINUTE = 60_000


async def commit(
    group: ConsumerGroupDriver, member_id: str, epoch: int, api_version: int = 9
) -> ErrorCode:
    results = await group.coordinator.commit_offsets(
        OffsetCommitRequest(
            "group",
            member_id,
            None,
            epoch,
            -1,
            api_version,
            (("t", (PartitionCommit(0, 5, -1, ""),)),),
        )
    )
    return results[0][1][0][1]


@async_test
async def test_a_member_commits_at_its_current_epoch_only() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    assert await commit(group, "m1", 1) is NONE
    assert await commit(group, "m1", 0) is ErrorCode.stale_member_epoch
    assert await commit(group, "m1", 2) is ErrorCode.stale_member_epoch
    assert await commit(group, "nobody", 1) is ErrorCode.unknown_member_id
    # A member of this protocol must use OffsetCommit v9+ (its epoch is the generation field).
    assert await commit(group, "m1", 1, api_version=8) is ErrorCode.unsupported_version
    # The admin client (no member, epoch -1) may commit only to an empty group.
    assert await commit(group, "", -1) is ErrorCode.unknown_member_id
    error, fetched = group.coordinator.fetch_offsets("group", [("t", [0])])
    assert error is NONE and fetched[0][1][0][1] is not None
    assert fetched[0][1][0][1].offset == 5


@async_test
async def test_a_fetch_naming_a_member_checks_its_epoch() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    fetch = group.coordinator.fetch_offsets
    assert fetch("group", [("t", [0])], ("m1", 1))[0] is NONE
    assert fetch("group", [("t", [0])], ("m1", 0))[0] is ErrorCode.stale_member_epoch
    assert fetch("group", [("t", [0])], ("ghost", 1))[0] is ErrorCode.unknown_member_id
    assert fetch("group", [("t", [0])], (None, -1))[0] is NONE


@async_test
async def test_an_empty_groups_offsets_expire_and_then_the_group_goes() -> None:
    clock = FakeClock()
    group = await new_group(
        clock, offsets_retention_ms=10 * MINUTE, offsets_retention_check_interval_ms=MINUTE
    )
    await group.heartbeat("m1", 0, topics=["t"])
    assert await commit(group, "m1", 1) is NONE
    # While a member subscribes to the topic its offset is kept, however old.
    for _ in range(22):
        clock.advance(MINUTE // 2)
        await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    await group.coordinator.idle()
    assert group.coordinator.fetch_offsets("group", [("t", [0])])[1][0][1][0][1] is not None

    await group.heartbeat("m1", -1)
    clock.advance(MINUTE)
    await asyncio.sleep(0)
    await group.coordinator.idle()
    # Retention counts from the commit, long past: the offset expires, then the empty group.
    assert "group" not in group.coordinator.consumer.groups
    error, listed = group.coordinator.list_groups([], [])
    assert error is NONE and listed == []


@async_test
async def test_delete_groups_deletes_only_an_empty_consumer_group() -> None:
    core = FakeCore()
    group = await new_group(core=core)
    await group.heartbeat("m1", 0, topics=["t"])
    assert await commit(group, "m1", 1) is NONE
    error, listed = group.coordinator.list_groups([], ["consumer"])
    assert error is NONE
    assert [(g.group_id, g.group_type, g.state, g.protocol_type) for g in listed] == [
        ("group", "consumer", "Stable", "consumer")
    ]
    assert group.coordinator.list_groups([], ["classic"])[1] == []
    assert await group.coordinator.delete_groups(["group"]) == [
        ("group", ErrorCode.non_empty_group)
    ]
    await group.heartbeat("m1", -1)
    assert await group.coordinator.delete_groups(["group"]) == [("group", NONE)]
    assert "group" not in group.coordinator.consumer.groups
    assert group.coordinator.fetch_offsets("group", [("t", [0])])[1][0][1][0][1] is None
    again = await group.heartbeat("m1", 1, owned={})
    assert again.error is ErrorCode.group_id_not_found
    # Gone from the log too: a coordinator replaying it does not bring the group back.
    await group.coordinator.close()
    restarted = await start_coordinator(fast_config(), core, group.controller, FakeClock())
    assert "group" not in restarted.consumer.groups
    assert restarted.fetch_offsets("group", [("t", [0])])[1][0][1][0][1] is None


@async_test
async def test_describe_groups_does_not_describe_a_consumer_group() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    described = group.coordinator.describe_group("group")
    assert (described.error, described.state, described.is_classic) == (NONE, "Dead", False)
    error, message, found = group.coordinator.consumer_group("group")
    assert (error, message) == (NONE, None) and found is not None
    assert found.state.value == "Stable" and found.group_epoch == 1
