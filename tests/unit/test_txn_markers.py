"""Transaction markers: grouped per leader, one request in flight per broker, retried until
written, dropped for deleted topics, completed with CompleteCommit/CompleteAbort."""

from __future__ import annotations

import asyncio
import threading

from kio.schema.errors import ErrorCode as E
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.metadata import TopicPartition
from krust.transaction.records import TRANSACTION_STATE_TOPIC
from krust.transaction.settings import MARKER_RETRY_BACKOFF_MS

from .doubles.clock import FakeClock
from .doubles.group import async_test
from .doubles.transaction import FakeTxnCore, TxnController, fast_config, start_coordinator

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)


async def served() -> tuple[TransactionCoordinator, FakeTxnCore, TxnController, FakeClock]:
    core = FakeTxnCore()
    controller = TxnController(broker_ids=(1, 2, 3))
    controller.add_topic("a", 2, leader=2)
    controller.move_leader("a", 1, 3)
    controller.add_topic("b", 1, leader=2)
    clock = FakeClock()
    coordinator = await start_coordinator(fast_config(), core, controller, clock)
    return coordinator, core, controller, clock


async def open_transaction(
    coordinator: TransactionCoordinator, transactional_id: str, *partitions: TopicPartition
) -> int:
    init = await coordinator.init_producer_id(transactional_id, 60_000)
    error = await coordinator.add_partitions(
        transactional_id, init.producer_id, 0, frozenset(partitions)
    )
    assert error is E.none
    return init.producer_id


async def wait_for_request_to(core: FakeTxnCore, node_id: int) -> None:
    while not any(r.node_id == node_id for r in core.sent):
        await asyncio.sleep(0.001)


@async_test
async def test_markers_go_to_each_leader_one_request_in_flight_per_broker() -> None:
    coordinator, core, _, _ = await served()
    first = await open_transaction(coordinator, "first", A0, A1)
    second = await open_transaction(coordinator, "second", B0)
    third = await open_transaction(coordinator, "third", A0)
    core.hold = threading.Event()
    await coordinator.end_transaction("first", first, 0, True, 0)
    await wait_for_request_to(core, 2)  # and held there
    await coordinator.end_transaction("second", second, 0, False, 0)
    await coordinator.end_transaction("third", third, 0, True, 0)
    core.hold.set()
    await coordinator.idle()
    # Each destination has its own sender thread, never the loop's default executor.
    assert {(r.node_id, r.thread.rsplit("_", 1)[0]) for r in core.sent} == {
        (2, "txn-markers-2"),
        (3, "txn-markers-3"),
    }
    to_broker_2 = [r.markers for r in core.sent if r.node_id == 2]
    to_broker_3 = [r.markers for r in core.sent if r.node_id == 3]
    assert [[m.partitions for m in ms] for ms in to_broker_3] == [[frozenset({A1})]]
    # The first request carried "first"; what queued meanwhile rode together in the next one.
    assert len(to_broker_2) == 2
    assert [m.producer_id for m in to_broker_2[0]] == [first]
    assert sorted((m.producer_id, m.commit) for m in to_broker_2[1]) == [
        (second, False),
        (third, True),
    ]
    for transactional_id, state in (
        ("first", "CompleteCommit"),
        ("second", "CompleteAbort"),
        ("third", "CompleteCommit"),
    ):
        assert coordinator.describe(transactional_id).state == state
    await coordinator.close()


@async_test
async def test_retriable_errors_and_unreachable_brokers_are_retried_after_a_backoff() -> None:
    coordinator, core, _, clock = await served()
    producer = await open_transaction(coordinator, "tx", A0, A1)
    core.partition_errors[A0] = [E.not_leader_or_follower, E.not_enough_replicas]
    core.unreachable[3] = 1
    await coordinator.end_transaction("tx", producer, 0, True, 0)
    await coordinator.idle()
    assert coordinator.describe("tx").state == "PrepareCommit"
    for _ in range(2):
        clock.advance(MARKER_RETRY_BACKOFF_MS)
        await coordinator.idle()
    assert coordinator.describe("tx").state == "CompleteCommit"
    sent_a0 = [r for r in core.sent if any(A0 in m.partitions for m in r.markers)]
    sent_a1 = [r for r in core.sent if any(A1 in m.partitions for m in r.markers)]
    assert (len(sent_a0), len(sent_a1)) == (3, 2)
    await coordinator.close()


@async_test
async def test_a_retry_goes_to_the_new_leader() -> None:
    coordinator, core, controller, clock = await served()
    producer = await open_transaction(coordinator, "tx", B0)
    core.partition_errors[B0] = [E.not_leader_or_follower]
    await coordinator.end_transaction("tx", producer, 0, False, 0)
    await coordinator.idle()
    controller.move_leader("b", 0, 3)
    clock.advance(MARKER_RETRY_BACKOFF_MS)
    await coordinator.idle()
    assert [r.node_id for r in core.sent] == [2, 3]
    assert coordinator.describe("tx").state == "CompleteAbort"
    await coordinator.close()


@async_test
async def test_partitions_of_a_deleted_topic_are_skipped() -> None:
    coordinator, core, controller, _ = await served()
    producer = await open_transaction(coordinator, "tx", A1, B0)
    controller.delete_topic("b")
    await coordinator.end_transaction("tx", producer, 0, True, 0)
    await coordinator.idle()
    assert [(r.node_id, r.markers[0].partitions) for r in core.sent] == [(3, frozenset({A1}))]
    assert coordinator.describe("tx").state == "CompleteCommit"
    await coordinator.close()


@async_test
async def test_markers_stop_when_the_coordinator_moves() -> None:
    coordinator, core, controller, clock = await served()
    producer = await open_transaction(coordinator, "tx", B0)
    core.unreachable[2] = 10**6
    await coordinator.end_transaction("tx", producer, 0, True, 0)
    await coordinator.idle()
    partition = coordinator.state.partition_for("tx")
    controller.move_leader(TRANSACTION_STATE_TOPIC, partition, 2)
    sent = len(core.sent)
    clock.advance(10 * MARKER_RETRY_BACKOFF_MS)
    await coordinator.idle()
    assert len(core.sent) == sent  # the new coordinator finishes the transaction
    assert not coordinator.markers.has_pending("tx")
    await coordinator.close()


@async_test
async def test_fenced_markers_are_given_up() -> None:
    coordinator, core, _, clock = await served()
    producer = await open_transaction(coordinator, "tx", B0)
    core.partition_errors[B0] = [E.transaction_coordinator_fenced]
    await coordinator.end_transaction("tx", producer, 0, True, 0)
    await coordinator.idle()
    clock.advance(10 * MARKER_RETRY_BACKOFF_MS)
    await coordinator.idle()
    assert len(core.sent) == 1
    assert coordinator.describe("tx").state == "PrepareCommit"
    await coordinator.close()


@async_test
async def test_a_new_leader_epoch_reloads_and_resends_under_the_new_coordinator_epoch() -> None:
    coordinator, core, controller, clock = await served()
    producer = await open_transaction(coordinator, "tx", B0)
    core.unreachable[2] = 1
    await coordinator.end_transaction("tx", producer, 0, True, 0)
    await coordinator.idle()
    partition = coordinator.state.partition_for("tx")
    controller.move_leader(TRANSACTION_STATE_TOPIC, partition, 1)  # re-elected: epoch 1
    await coordinator.idle()
    assert coordinator.describe("tx").state == "CompleteCommit"
    assert [m.coordinator_epoch for r in core.sent for m in r.markers] == [0, 1]
    clock.advance(10 * MARKER_RETRY_BACKOFF_MS)  # the old epoch's retry is dropped
    await coordinator.idle()
    assert len(core.sent) == 2
    await coordinator.close()
