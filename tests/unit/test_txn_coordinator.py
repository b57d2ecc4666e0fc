"""The transaction coordinator's state machine and Kafka's error codes, on a fake clock."""

from __future__ import annotations

import threading

from kio.schema.errors import ErrorCode as E
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.metadata import TopicPartition, TransactionState
from krust.transaction.records import TRANSACTION_STATE_TOPIC, TransactionRecordCodec

from .doubles.clock import FakeClock
from .doubles.group import async_test
from .doubles.transaction import FakeTxnCore, TxnController, fast_config, start_coordinator

P0 = TopicPartition("orders", 0)
P1 = TopicPartition("orders", 1)
BOTH = frozenset({P0, P1})


async def served(
    core: FakeTxnCore | None = None, clock: FakeClock | None = None, **config: int
) -> tuple[TransactionCoordinator, FakeTxnCore, TxnController, FakeClock]:
    core = core or FakeTxnCore()
    controller = TxnController()
    controller.add_topic("orders", 2)
    clock = clock or FakeClock()
    coordinator = await start_coordinator(fast_config(**config), core, controller, clock)
    return coordinator, core, controller, clock


def state_of(coordinator: TransactionCoordinator, transactional_id: str) -> str:
    return coordinator.describe(transactional_id).state


def stored(core: FakeTxnCore) -> list[tuple[str, TransactionState | None]]:
    codec = TransactionRecordCodec()
    decoded = [codec.decode(r["key"], r["value"]) for r in core.records(TRANSACTION_STATE_TOPIC)]
    return [(tid, t.state if t else None) for tid, t in (d for d in decoded if d is not None)]


@async_test
async def test_commit_writes_every_state_and_sends_the_markers() -> None:
    coordinator, core, _, _ = await served()
    init = await coordinator.init_producer_id("tx", 60_000)
    assert (init.error, init.producer_id, init.producer_epoch) == (E.none, 1000, 0)
    assert await coordinator.add_partitions("tx", 1000, 0, BOTH) is E.none
    ended = await coordinator.end_transaction("tx", 1000, 0, True, 0)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, 1000, 0)
    await coordinator.idle()
    assert [r.node_id for r in core.sent] == [1]
    (marker,) = core.sent[0].markers
    assert (marker.producer_id, marker.producer_epoch, marker.commit) == (1000, 0, True)
    assert marker.partitions == BOTH
    S = TransactionState
    assert [s for _, s in stored(core)] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert state_of(coordinator, "tx") == "CompleteCommit"
    # A retried commit of the completed transaction succeeds without a new transaction.
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 0)).error is E.none
    assert (await coordinator.end_transaction("tx", 1000, 0, False, 0)).error is E.invalid_txn_state
    await coordinator.close()


@async_test
async def test_a_second_init_bumps_the_epoch_and_fences_the_old_producer() -> None:
    coordinator, _, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    again = await coordinator.init_producer_id("tx", 60_000)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.none, 1000, 1)
    assert await coordinator.add_partitions("tx", 1000, 0, BOTH) is E.producer_fenced
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 0)).error is E.producer_fenced
    assert await coordinator.add_partitions("tx", 999, 1, BOTH) is E.invalid_producer_id_mapping
    await coordinator.close()


@async_test
async def test_init_during_a_transaction_aborts_it_with_a_bumped_epoch() -> None:
    coordinator, core, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    await coordinator.add_partitions("tx", 1000, 0, BOTH)
    fenced = await coordinator.init_producer_id("tx", 60_000)
    assert fenced.error is E.concurrent_transactions
    await coordinator.idle()
    (marker,) = core.sent[0].markers
    assert (marker.commit, marker.producer_epoch) == (False, 1)
    assert state_of(coordinator, "tx") == "CompleteAbort"
    retried = await coordinator.init_producer_id("tx", 60_000)
    assert (retried.error, retried.producer_epoch) == (E.none, 2)
    await coordinator.close()


@async_test
async def test_concurrent_transactions_while_markers_are_in_flight() -> None:
    coordinator, core, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    await coordinator.add_partitions("tx", 1000, 0, BOTH)
    core.hold = threading.Event()
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 0)).error is E.none
    assert state_of(coordinator, "tx") == "PrepareCommit"
    assert await coordinator.add_partitions("tx", 1000, 0, BOTH) is E.concurrent_transactions
    assert (await coordinator.init_producer_id("tx", 60_000)).error is E.concurrent_transactions
    ended = await coordinator.end_transaction("tx", 1000, 0, True, 0)
    assert ended.error is E.concurrent_transactions
    abort = await coordinator.end_transaction("tx", 1000, 0, False, 0)
    assert abort.error is E.concurrent_transactions
    core.hold.set()
    await coordinator.idle()
    assert state_of(coordinator, "tx") == "CompleteCommit"
    await coordinator.close()


@async_test
async def test_end_txn_errors() -> None:
    coordinator, _, _, _ = await served()
    unknown = await coordinator.end_transaction("nobody", 1, 0, True, 0)
    assert unknown.error is E.invalid_producer_id_mapping
    await coordinator.init_producer_id("tx", 60_000)
    # Nothing was added: there is no transaction to end.
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 0)).error is E.invalid_txn_state
    assert (await coordinator.end_transaction("", 1000, 0, True, 0)).error is E.invalid_request
    await coordinator.close()


@async_test
async def test_transaction_timeout_is_checked_against_the_maximum() -> None:
    coordinator, _, _, _ = await served(transaction_max_timeout_ms=1000)
    assert (await coordinator.init_producer_id("tx", 1001)).error is E.invalid_transaction_timeout
    assert (await coordinator.init_producer_id("tx", 0)).error is E.invalid_transaction_timeout
    assert (await coordinator.init_producer_id("tx", 1000)).error is E.none
    await coordinator.close()


@async_test
async def test_kip_360_bump_with_the_producers_id_and_epoch() -> None:
    coordinator, _, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    bumped = await coordinator.init_producer_id("tx", 60_000, (1000, 0))
    assert (bumped.error, bumped.producer_epoch) == (E.none, 1)
    # The producer lost the answer and retries with its old epoch: the same epoch again.
    retried = await coordinator.init_producer_id("tx", 60_000, (1000, 0))
    assert (retried.error, retried.producer_epoch) == (E.none, 1)
    assert (await coordinator.init_producer_id("tx", 60_000, (1000, 7))).error is E.producer_fenced
    assert (await coordinator.init_producer_id("tx", 60_000, (77, 1))).error is E.producer_fenced
    await coordinator.close()


@async_test
async def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    coordinator, _, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    _, entry = coordinator.state.lookup("tx")
    assert entry is not None
    entry.metadata.producer_epoch = 32766
    rotated = await coordinator.init_producer_id("tx", 60_000)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (E.none, 1001, 0)
    await coordinator.close()


@async_test
async def test_transaction_version_2_bumps_the_epoch_at_every_end() -> None:
    coordinator, core, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    await coordinator.add_partitions("tx", 1000, 0, BOTH)
    ended = await coordinator.end_transaction("tx", 1000, 0, True, 2)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, 1000, 1)
    await coordinator.idle()
    assert core.sent[0].markers[0].producer_epoch == 1  # the markers fence epoch 0
    # A retry with the old epoch (its answer was lost) gets the same answer.
    retry = await coordinator.end_transaction("tx", 1000, 0, True, 2)
    assert (retry.error, retry.producer_epoch) == (E.none, 1)
    assert await coordinator.add_partitions("tx", 1000, 0, BOTH) is E.producer_fenced
    assert await coordinator.add_partitions("tx", 1000, 1, BOTH) is E.none
    await coordinator.close()


@async_test
async def test_transaction_version_2_rotates_the_producer_id_when_the_epoch_runs_out() -> None:
    coordinator, _, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    _, entry = coordinator.state.lookup("tx")
    assert entry is not None
    entry.metadata.producer_epoch = 32766
    await coordinator.add_partitions("tx", 1000, 32766, BOTH)
    ended = await coordinator.end_transaction("tx", 1000, 32766, False, 2)
    await coordinator.idle()
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, 1000, 32767)
    described = coordinator.describe("tx")
    assert (described.producer_id, described.producer_epoch) == (1001, 0)
    # The retry of that EndTxn is recognised through the previous producer id.
    retry = await coordinator.end_transaction("tx", 1000, 32766, False, 2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, 1001, 0)
    await coordinator.close()


@async_test
async def test_verify_answers_whether_partitions_are_in_the_transaction() -> None:
    coordinator, _, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    await coordinator.add_partitions("tx", 1000, 0, frozenset({P0}))
    assert coordinator.verify("tx", 1000, 0, BOTH) == {P0: E.none, P1: E.transaction_abortable}
    assert coordinator.verify("tx", 1000, 1, BOTH) == dict.fromkeys(BOTH, E.producer_fenced)
    assert coordinator.verify("tx", 5, 0, BOTH) == dict.fromkeys(
        BOTH, E.invalid_producer_id_mapping
    )
    assert coordinator.verify("nobody", 5, 0, BOTH) == dict.fromkeys(
        BOTH, E.invalid_producer_id_mapping
    )
    await coordinator.close()


@async_test
async def test_a_transaction_past_its_timeout_is_aborted_with_an_epoch_bump() -> None:
    coordinator, core, _, clock = await served(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=1000
    )
    await coordinator.init_producer_id("tx", 5000)
    await coordinator.add_partitions("tx", 1000, 0, BOTH)
    clock.advance(5000)
    await coordinator.idle()
    assert state_of(coordinator, "tx") == "Ongoing"  # not longer than its timeout yet
    clock.advance(1000)
    await coordinator.idle()
    assert state_of(coordinator, "tx") == "CompleteAbort"
    assert coordinator.describe("tx").producer_epoch == 1
    (marker,) = core.sent[0].markers
    assert (marker.commit, marker.producer_epoch) == (False, 1)
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 0)).error is E.producer_fenced
    await coordinator.close()


@async_test
async def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    coordinator, core, _, clock = await served(
        transactional_id_expiration_ms=10_000,
        transaction_remove_expired_transaction_cleanup_interval_ms=4000,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=10**9,
    )
    await coordinator.init_producer_id("idle", 60_000)
    await coordinator.init_producer_id("busy", 600_000)
    await coordinator.add_partitions("busy", 1001, 0, BOTH)
    clock.advance(8000)
    await coordinator.idle()
    assert coordinator.describe("idle").error is E.none
    clock.advance(4000)
    await coordinator.idle()
    assert coordinator.describe("idle").error is E.transactional_id_not_found
    assert coordinator.describe("busy").state == "Ongoing"  # a transaction under way stays
    assert ("idle", None) in stored(core)
    await coordinator.close()
    # After a reload the id is still gone.
    reloaded, _, _, _ = await served(core)
    assert reloaded.describe("idle").error is E.transactional_id_not_found
    await reloaded.close()


@async_test
async def test_reload_restores_state_and_completes_a_prepared_commit() -> None:
    core = FakeTxnCore()
    coordinator, _, _, _ = await served(core)
    await coordinator.init_producer_id("done", 60_000)
    await coordinator.init_producer_id("open", 60_000)
    await coordinator.add_partitions("open", 1001, 0, frozenset({P0}))
    await coordinator.init_producer_id("prepared", 60_000)
    await coordinator.add_partitions("prepared", 1002, 0, BOTH)
    core.unreachable[1] = 10**6  # the markers never arrive before this coordinator goes away
    assert (await coordinator.end_transaction("prepared", 1002, 0, True, 0)).error is E.none
    await coordinator.close()
    core.unreachable.clear()
    core.sent.clear()

    reloaded, _, _, _ = await served(core)
    await reloaded.idle()
    assert reloaded.describe("done").state == "Empty"
    assert reloaded.describe("open").partitions == (P0,)
    assert reloaded.describe("prepared").state == "CompleteCommit"
    (marker,) = core.sent[0].markers
    assert (marker.producer_id, marker.commit, marker.partitions) == (1002, True, BOTH)
    await reloaded.close()


@async_test
async def test_ids_of_a_partition_another_broker_leads_are_not_coordinated_here() -> None:
    coordinator, _, controller, _ = await served()
    partition = coordinator.state.partition_for("tx")
    controller.move_leader(TRANSACTION_STATE_TOPIC, partition, 2)
    assert (await coordinator.init_producer_id("tx", 60_000)).error is E.not_coordinator
    assert coordinator.describe("tx").error is E.not_coordinator
    await coordinator.close()


@async_test
async def test_list_transactions_filters() -> None:
    coordinator, _, _, clock = await served()
    await coordinator.init_producer_id("a", 60_000)
    await coordinator.init_producer_id("b", 60_000)
    await coordinator.add_partitions("b", 1001, 0, BOTH)
    clock.advance(5000)

    def listed(*args: object) -> tuple[E, list[str], list[str]]:
        error, unknown, found = coordinator.list_transactions(*args)  # type: ignore[arg-type]
        return error, unknown, sorted(t.transactional_id for t in found)

    assert listed([], []) == (E.none, [], ["a", "b"])
    assert listed(["Ongoing", "Nope"], []) == (E.none, ["Nope"], ["b"])
    assert listed([], [1000]) == (E.none, [], ["a"])
    # KIP-994: transactions running longer than the duration.
    assert listed(["Ongoing"], [], 4000) == (E.none, [], ["b"])
    assert listed(["Ongoing"], [], 6000) == (E.none, [], [])
    await coordinator.close()


@async_test
async def test_find_coordinator_creates_the_topic_with_kafkas_configs() -> None:
    controller = TxnController()
    config = fast_config(transaction_state_log_replication_factor=1)
    from asyncio import get_running_loop

    coordinator = TransactionCoordinator(
        config, FakeTxnCore(), controller, FakeClock(), get_running_loop()
    )
    coordinator.start()
    location = await coordinator.find_coordinator("tx", "PLAINTEXT")
    assert (location.error, location.node_id, location.port) == (E.none, 1, 9091)
    ((name, partitions, replication, configs, internal),) = controller.created
    assert (name, partitions, replication, internal) == (TRANSACTION_STATE_TOPIC, 4, 1, True)
    assert configs == {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": "2",
        "segment.bytes": str(100 * 1024 * 1024),
        "unclean.leader.election.enable": "false",
    }
    await coordinator.idle()
    assert (await coordinator.init_producer_id("tx", 60_000)).error is E.none
    await coordinator.close()


@async_test
async def test_transaction_version_2_aborts_without_a_transaction_with_an_epoch_bump() -> None:
    coordinator, core, _, _ = await served()
    await coordinator.init_producer_id("tx", 60_000)
    # Empty: commit is invalid, abort bumps the epoch (the client may not know the state).
    assert (await coordinator.end_transaction("tx", 1000, 0, True, 2)).error is E.invalid_txn_state
    aborted = await coordinator.end_transaction("tx", 1000, 0, False, 2)
    assert (aborted.error, aborted.producer_epoch) == (E.none, 1)
    await coordinator.idle()
    assert coordinator.describe("tx").state == "CompleteAbort"
    assert core.sent == []  # no partition, no marker
    # CompleteAbort: a retry of that abort is NONE, a commit INVALID_TXN_STATE.
    assert (await coordinator.end_transaction("tx", 1000, 0, False, 2)).error is E.none
    assert (await coordinator.end_transaction("tx", 1000, 1, True, 2)).error is E.invalid_txn_state
    # CompleteCommit: an abort with the current epoch bumps again, a stale one is fenced.
    await coordinator.add_partitions("tx", 1000, 1, BOTH)
    await coordinator.end_transaction("tx", 1000, 1, True, 2)
    await coordinator.idle()
    assert (await coordinator.end_transaction("tx", 1000, 2, True, 2)).error is E.invalid_txn_state
    again = await coordinator.end_transaction("tx", 1000, 2, False, 2)
    assert (again.error, again.producer_epoch) == (E.none, 3)
    await coordinator.idle()
    assert (await coordinator.end_transaction("tx", 1000, 0, False, 2)).error is E.producer_fenced
    await coordinator.close()


@async_test
async def test_a_failed_write_changes_nothing_and_a_failed_fence_is_not_bumped_twice() -> None:
    coordinator, core, _, _ = await served()
    core.fail_appends = True
    assert (await coordinator.init_producer_id("tx", 60_000)).error is E.coordinator_not_available
    core.fail_appends = False
    assert (await coordinator.init_producer_id("tx", 60_000)).producer_epoch == 0
    await coordinator.add_partitions("tx", 1000, 0, BOTH)
    core.fail_appends = True
    more = frozenset({TopicPartition("x", 0)})
    assert await coordinator.add_partitions("tx", 1000, 0, more) is E.coordinator_not_available
    fence = await coordinator.init_producer_id("tx", 60_000)
    assert fence.error is E.coordinator_not_available
    core.fail_appends = False
    assert coordinator.describe("tx").partitions == tuple(sorted(BOTH))
    # The fence's epoch (1) was never written: the next fence uses it again, not 2.
    assert (await coordinator.init_producer_id("tx", 60_000)).error is E.concurrent_transactions
    await coordinator.idle()
    assert [m.producer_epoch for r in core.sent for m in r.markers] == [1]
    assert (await coordinator.init_producer_id("tx", 60_000)).producer_epoch == 2
    await coordinator.close()
