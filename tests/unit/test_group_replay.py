"""A restarted coordinator rebuilds groups and offsets from __consumer_offsets; ownership rules."""

from __future__ import annotations

import asyncio

from krust.group.classic.group import GroupState
from krust.group.coordinator import GroupCoordinator
from krust.group.offset_manager import OffsetCommitRequest, PartitionCommit
from krust.group.records import OFFSETS_TOPIC
from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeBroker,
    FakeController,
    FakeCore,
    async_test,
    begin,
    fast_config,
    form_stable_group,
    join_request,
    start_coordinator,
)

NONE = ErrorCode.none


def controller_with_orders() -> FakeController:
    controller = FakeController()
    controller.add_topic("orders", 4)
    return controller


async def commit(
    coordinator: GroupCoordinator,
    group_id: str,
    partition: int,
    offset: int,
    metadata: str,
    member_id: str = "",
    generation_id: int = -1,
) -> None:
    [(_, [(_, error)])] = await coordinator.commit_offsets(
        OffsetCommitRequest(
            group_id,
            member_id,
            None,
            generation_id,
            -1,
            9,
            (("orders", (PartitionCommit(partition, offset, 2, metadata),)),),
        )
    )
    assert error is NONE


async def restart(
    core: FakeCore, controller: FakeController, clock: FakeClock, **config: int
) -> GroupCoordinator:
    return await start_coordinator(fast_config(**config), core, controller, clock)


@async_test
async def test_restart_restores_offsets_with_metadata_and_timestamps() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    await commit(first, "g1", 0, 10, "first")
    clock.advance(1000)
    await commit(first, "g1", 0, 11, "second")
    await commit(first, "g1", 3, 7, "")
    await commit(first, "g2", 1, 5, "other group")
    await first.close()

    second = await restart(core, controller, clock)
    for group_id, partition, offset, metadata in [
        ("g1", 0, 11, "second"),
        ("g1", 3, 7, ""),
        ("g2", 1, 5, "other group"),
    ]:
        stored = second.offsets.store.get(group_id, ("orders", partition))
        assert stored is not None
        assert (stored.offset, stored.metadata, stored.leader_epoch) == (offset, metadata, 2)
    restored = second.offsets.store.get("g1", ("orders", 0))
    assert restored is not None and restored.commit_timestamp_ms == clock.now_ms()
    assert {g.group_id for g in second.list_groups([], [])[1]} == {"g1", "g2"}


@async_test
async def test_restart_restores_a_stable_group_that_its_members_can_keep_using() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    leader, follower = await form_stable_group(
        first, clock, "group", 2, group_instance_ids=["i-1", None]
    )
    before = first.describe_group("group")
    await first.close()

    second = await restart(core, controller, clock)
    after = second.describe_group("group")
    assert after == before
    assert after.state == "Stable" and after.protocol_data == "range"
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in after.members] == [
        (leader.member_id, "i-1", b"assignment-0"),
        (follower.member_id, None, b"assignment-1"),
    ]
    group = second.groups.groups["group"]
    assert (group.generation_id, group.leader_id) == (1, leader.member_id)
    # The members carry on as if nothing happened.
    assert second.heartbeat("group", leader.member_id, "i-1", 1) is NONE
    assert second.heartbeat("group", follower.member_id, None, 1) is NONE
    await commit(second, "group", 0, 3, "", follower.member_id, 1)


@async_test
async def test_restored_members_that_never_return_expire_and_the_group_empties() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    await form_stable_group(first, clock, "group", 2, rebalance_timeout_ms=5000)
    await first.close()

    second = await restart(core, controller, clock)
    clock.advance(10_000)  # session timeout
    clock.advance(5000)  # rebalance timeout for the second one
    assert second.groups.groups["group"].state is GroupState.EMPTY
    await second.close()
    third = await restart(core, controller, clock)
    assert third.describe_group("group").state == "Empty"
    assert third.groups.groups["group"].generation_id == 2


@async_test
async def test_deleted_groups_and_offsets_stay_deleted_after_restart() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    await commit(first, "doomed", 0, 1, "")
    await commit(first, "kept", 0, 1, "")
    await commit(first, "kept", 1, 1, "")
    assert await first.delete_groups(["doomed"]) == [("doomed", NONE)]
    error, _ = await first.delete_offsets("kept", [("orders", [1])])
    assert error is NONE
    await first.close()

    second = await restart(core, controller, clock)
    assert "doomed" not in second.groups.groups
    assert second.offsets.store.group_offsets("doomed") == {}
    assert set(second.offsets.store.group_offsets("kept")) == {("orders", 0)}


@async_test
async def test_replay_after_compaction_gives_the_same_state() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    for offset in range(5):
        await commit(first, "g", 0, offset, f"m{offset}")
    await form_stable_group(first, clock, "group", 1)
    await first.delete_offsets("g", [("orders", [0])])
    await commit(first, "g", 1, 9, "")
    await first.close()
    core.compact()

    second = await restart(core, controller, clock, offsets_load_buffer_size=1)
    assert second.offsets.store.group_offsets("g").keys() == {("orders", 1)}
    assert second.describe_group("group").state == "Stable"


@async_test
async def test_an_undecodable_record_is_skipped_and_left_in_place() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    await commit(first, "g", 0, 1, "")
    partition = first.partition_for("g")
    core.internal_append(OFFSETS_TOPIC, partition, [(b"\x00\x01garbage", b"\xff")])
    core.internal_append(OFFSETS_TOPIC, partition, [(b"\x00\x05newer-type", b"x")])
    await commit(first, "g", 1, 2, "")
    await first.close()
    log_before = list(core.logs[(OFFSETS_TOPIC, partition)])

    second = await restart(core, controller, clock)
    assert set(second.offsets.store.group_offsets("g")) == {("orders", 0), ("orders", 1)}
    assert core.logs[(OFFSETS_TOPIC, partition)] == log_before


@async_test
async def test_requests_wait_for_the_partition_to_load() -> None:
    clock, core, controller = FakeClock(), FakeCore(), controller_with_orders()
    first = await start_coordinator(fast_config(), core, controller, clock)
    await commit(first, "g", 0, 1, "")
    await first.close()

    second = GroupCoordinator(fast_config(), core, controller, clock, asyncio.get_running_loop())
    second.start()
    assert second.fetch_offsets("g", None) == (ErrorCode.coordinator_load_in_progress, [])
    joined = await second.join_group(join_request("g"))
    assert joined.error is ErrorCode.coordinator_load_in_progress
    error, _ = second.list_groups([], [])
    assert error is ErrorCode.coordinator_load_in_progress
    await second.wait_loaded()
    error, [(_, [(_, offset)])] = second.fetch_offsets("g", None)
    assert error is NONE and offset is not None and offset.offset == 1


@async_test
async def test_find_coordinator_answers_the_address_on_the_requesters_listener() -> None:
    clock, controller = FakeClock(), FakeController(node_id=1, broker_ids=(1, 2))
    controller.image.brokers[2] = FakeBroker(
        2, "broker-2.test", 9092, listeners={"SSL": ("tls-2.test", 9093)}
    )
    config = fast_config()
    controller.add_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, leader=2)
    coordinator = await start_coordinator(config, controller=controller, clock=clock)
    ssl = await coordinator.find_coordinator("g", "SSL")
    assert (ssl.node_id, ssl.host, ssl.port) == (2, "tls-2.test", 9093)
    plaintext = await coordinator.find_coordinator("g", "PLAINTEXT")
    assert (plaintext.host, plaintext.port) == ("broker-2.test", 9092)


@async_test
async def test_groups_of_partitions_led_elsewhere_get_not_coordinator() -> None:
    clock, controller = FakeClock(), FakeController(node_id=1, broker_ids=(1, 2))
    config = fast_config()
    controller.add_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, leader=2)
    coordinator = await start_coordinator(config, controller=controller, clock=clock)
    result = await coordinator.join_group(join_request("g"))
    assert result.error is ErrorCode.not_coordinator
    location = await coordinator.find_coordinator("g")
    assert (location.error, location.node_id, location.host, location.port) == (
        NONE,
        2,
        "broker-2.test",
        9092,
    )


@async_test
async def test_losing_leadership_unloads_groups_and_answers_parked_joins() -> None:
    clock, controller = FakeClock(), FakeController(node_id=1, broker_ids=(1, 2))
    coordinator = await start_coordinator(controller=controller, clock=clock)
    (member,) = await form_stable_group(coordinator, clock, "group", 1)
    parked = await begin(coordinator.join_group(join_request("group", client_id="late")))
    controller.move_leader(OFFSETS_TOPIC, coordinator.partition_for("group"), 2)
    assert coordinator.heartbeat("group", member.member_id, None, 1) is ErrorCode.not_coordinator
    assert (await parked).error is ErrorCode.not_coordinator
    assert "group" not in coordinator.groups.groups
    # Getting it back reloads the group from the log.
    controller.move_leader(OFFSETS_TOPIC, coordinator.partition_for("group"), 1)
    assert coordinator.heartbeat("group", member.member_id, None, 1) is (
        ErrorCode.coordinator_load_in_progress
    )
    await coordinator.wait_loaded()
    assert coordinator.heartbeat("group", member.member_id, None, 1) is NONE


@async_test
async def test_leadership_changes_load_and_unload_without_waiting_for_a_request() -> None:
    clock, controller = FakeClock(), FakeController(node_id=1, broker_ids=(1, 2))
    coordinator = await start_coordinator(controller=controller, clock=clock)
    await form_stable_group(coordinator, clock, "group", 1)
    partition = coordinator.partition_for("group")
    parked = await begin(coordinator.join_group(join_request("group", client_id="late")))
    controller.move_leader(OFFSETS_TOPIC, partition, 2)
    # The metadata change alone unloaded the group and answered its parked join.
    assert (await parked).error is ErrorCode.not_coordinator
    assert "group" not in coordinator.groups.groups
    controller.move_leader(OFFSETS_TOPIC, partition, 1)
    await coordinator.wait_loaded()
    assert "group" in coordinator.groups.groups, "loaded as soon as this broker led again"


@async_test
async def test_find_coordinator_creates_the_offsets_topic_on_first_use() -> None:
    clock, controller = FakeClock(), FakeController()
    config = fast_config(offsets_topic_replication_factor=1, offsets_topic_segment_bytes=1048576)
    coordinator = GroupCoordinator(
        config, FakeCore(), controller, clock, asyncio.get_running_loop()
    )
    coordinator.start()
    assert (await coordinator.join_group(join_request("g"))).error is (
        ErrorCode.coordinator_not_available
    )
    location = await coordinator.find_coordinator("g")
    assert (location.error, location.node_id, location.host, location.port) == (
        NONE,
        1,
        "broker-1.test",
        9091,
    )
    assert controller.created == [
        (
            OFFSETS_TOPIC,
            4,
            1,
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": "1048576",
            },
            True,
        )
    ]
    await coordinator.wait_loaded()
    join = await begin(coordinator.join_group(join_request("g")))
    clock.advance(0)
    assert (await join).error is NONE
    await coordinator.find_coordinator("other")
    assert len(controller.created) == 1


@async_test
async def test_find_coordinator_reports_a_failed_topic_creation() -> None:
    controller = FakeController()
    controller.fail_creation = True
    coordinator = GroupCoordinator(
        fast_config(), FakeCore(), controller, FakeClock(), asyncio.get_running_loop()
    )
    assert (await coordinator.find_coordinator("g")).error is ErrorCode.coordinator_not_available
    controller.fail_creation = False
    assert (await coordinator.find_coordinator("g")).error is NONE


@async_test
async def test_partition_without_a_live_leader_has_no_coordinator() -> None:
    controller = FakeController()
    controller.add_topic(OFFSETS_TOPIC, 4, leader=-1)
    coordinator = await start_coordinator(controller=controller)
    assert (await coordinator.find_coordinator("g")).error is ErrorCode.coordinator_not_available


@async_test
async def test_close_answers_parked_joins() -> None:
    clock = FakeClock()
    coordinator = await start_coordinator(clock=clock)
    parked = await begin(coordinator.join_group(join_request("g")))
    await coordinator.close()
    assert (await parked).error is ErrorCode.not_coordinator
