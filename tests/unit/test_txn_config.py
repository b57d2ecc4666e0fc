"""The transaction coordinator's broker settings, read by their Kafka names, act."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode as E
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.metadata import TopicPartition
from krust.transaction.records import TRANSACTION_STATE_TOPIC
from krust.transaction.settings import TransactionCoordinatorConfig

from .doubles.clock import FakeClock
from .doubles.group import async_test
from .doubles.transaction import FakeTxnCore, TxnController, start_coordinator


async def served(settings: dict[str, int]) -> tuple[TransactionCoordinator, FakeClock]:
    config = TransactionCoordinatorConfig.from_config(
        {"transaction.state.log.num.partitions": 3, **settings}
    )
    controller = TxnController()
    controller.add_topic("orders", 1)
    clock = FakeClock()
    return await start_coordinator(config, FakeTxnCore(), controller, clock), clock


@async_test
async def test_topic_settings_shape_the_transaction_state_topic() -> None:
    controller = TxnController()
    config = TransactionCoordinatorConfig.from_config(
        {
            "transaction.state.log.num.partitions": 7,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.segment.bytes": 2 * 1024 * 1024,
            "transaction.state.log.min.isr": 1,
        }
    )
    coordinator = TransactionCoordinator(
        config, FakeTxnCore(), controller, FakeClock(), asyncio.get_running_loop()
    )
    coordinator.start()
    assert (await coordinator.find_coordinator("tx", "PLAINTEXT")).error is E.none
    ((name, partitions, replication, configs, _),) = controller.created
    assert (name, partitions, replication) == (TRANSACTION_STATE_TOPIC, 7, 1)
    assert configs["segment.bytes"] == str(2 * 1024 * 1024)
    assert configs["min.insync.replicas"] == "1"
    await coordinator.close()


@async_test
async def test_transaction_max_timeout_ms_bounds_the_producers_timeout() -> None:
    coordinator, _ = await served({"transaction.max.timeout.ms": 1000})
    assert (await coordinator.init_producer_id("tx", 1001)).error is E.invalid_transaction_timeout
    assert (await coordinator.init_producer_id("tx", 1000)).error is E.none
    await coordinator.close()


@async_test
async def test_timed_out_transactions_are_aborted_at_the_next_check() -> None:
    coordinator, clock = await served(
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    )
    await coordinator.init_producer_id("tx", 1000)
    await coordinator.add_partitions("tx", 1000, 0, frozenset({TopicPartition("orders", 0)}))
    clock.advance(1000)
    await coordinator.idle()
    assert coordinator.describe("tx").state == "Ongoing"
    clock.advance(500)  # the default interval (10 s) would not have looked yet
    await coordinator.idle()
    assert coordinator.describe("tx").state == "CompleteAbort"
    await coordinator.close()


@async_test
async def test_idle_ids_expire_after_the_expiration_checked_every_interval() -> None:
    coordinator, clock = await served(
        {
            "transactional.id.expiration.ms": 1000,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 600,
        }
    )
    await coordinator.init_producer_id("tx", 60_000)
    clock.advance(600)
    await coordinator.idle()
    assert coordinator.describe("tx").error is E.none
    clock.advance(600)  # checked at 1200 ms: idle since 0, past 1000 ms
    await coordinator.idle()
    assert coordinator.describe("tx").error is E.transactional_id_not_found
    await coordinator.close()
