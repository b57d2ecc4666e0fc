"""TxnOffsetCommit and the markers that end it (KIP-98, KIP-447), through the group APIs: offsets
committed in a transaction are invisible until its COMMIT marker, dropped by ABORT, reported
UNSTABLE_OFFSET_COMMIT to require_stable fetches meanwhile, and rebuilt the same way on reload."""

from __future__ import annotations

from typing import Any

from krust.group.records import OFFSETS_TOPIC

from .doubles.clock import FakeClock
from .doubles.group import FakeController, FakeCore, async_test, start_coordinator
from .test_group_handlers import Client

PRODUCER_ID, EPOCH = 4000, 3


async def setup() -> tuple[FakeCore, Client, Any]:
    core, controller = FakeCore(), FakeController()
    controller.add_topic("in", 2)
    coordinator = await start_coordinator(core=core, controller=controller, clock=FakeClock())
    return core, Client(coordinator, core=core), coordinator


async def txn_commit(client: Client, offset: int, **fields: Any) -> Any:
    return await client.send(
        28,
        3,
        {
            "transactional_id": "copier",
            "group_id": "g",
            "producer_id": PRODUCER_ID,
            "producer_epoch": EPOCH,
            "topics": [
                {
                    "name": "in",
                    "partitions": [{"partition_index": 0, "committed_offset": offset}],
                }
            ],
            **fields,
        },
    )


async def fetch(client: Client, require_stable: bool = False) -> tuple[int, int]:
    response = await client.send(
        9,
        7,
        {
            "group_id": "g",
            "topics": [{"name": "in", "partition_indexes": [0]}],
            "require_stable": require_stable,
        },
    )
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.error_code.value


async def marker(client: Client, partition: int, commit: bool) -> Any:
    return await client.send(
        27,
        1,
        {
            "markers": [
                {
                    "producer_id": PRODUCER_ID,
                    "producer_epoch": EPOCH,
                    "transaction_result": commit,
                    "coordinator_epoch": 0,
                    "topics": [{"name": OFFSETS_TOPIC, "partition_indexes": [partition]}],
                }
            ]
        },
    )


@async_test
async def test_offsets_of_a_transaction_show_only_after_its_commit_marker() -> None:
    core, client, coordinator = await setup()
    committed = await txn_commit(client, 42)
    assert committed.topics[0].partitions[0].error_code.value == 0
    # Written in the producer's transaction, not yet visible.
    records = core.records()
    assert records and all(r["producer_id"] == PRODUCER_ID for r in records)
    assert await fetch(client) == (-1, 0)
    assert await fetch(client, require_stable=True) == (-1, 88)  # UNSTABLE_OFFSET_COMMIT
    # A marker on another partition leaves the group's offsets pending.
    other = (coordinator.partition_for("g") + 1) % 4
    await marker(client, other, commit=True)
    assert await fetch(client, require_stable=True) == (-1, 88)
    answer = await marker(client, coordinator.partition_for("g"), commit=True)
    assert answer.markers[0].topics[0].partitions[0].error_code.value == 0
    assert await fetch(client, require_stable=True) == (42, 0)


@async_test
async def test_an_aborted_transaction_leaves_the_committed_offset() -> None:
    _, client, coordinator = await setup()
    await client.send(
        8,
        8,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": "in", "partitions": [{"partition_index": 0, "committed_offset": 7}]}
            ],
        },
    )
    await txn_commit(client, 42)
    await marker(client, coordinator.partition_for("g"), commit=False)
    assert await fetch(client, require_stable=True) == (7, 0)


@async_test
async def test_a_reload_commits_aborts_and_keeps_open_transactions_as_the_log_says() -> None:
    core, client, coordinator = await setup()
    partition = coordinator.partition_for("g")
    await txn_commit(client, 10)
    await marker(client, partition, commit=True)
    await txn_commit(client, 20)
    await marker(client, partition, commit=False)
    await txn_commit(client, 30)  # still open when the partition is replayed
    await coordinator.close()

    controller = FakeController()
    controller.add_topic("in", 2)
    reloaded = await start_coordinator(core=core, controller=controller, clock=FakeClock())
    again = Client(reloaded, core=core)
    assert await fetch(again) == (10, 0)
    assert await fetch(again, require_stable=True) == (-1, 88)
    await marker(again, partition, commit=True)
    assert await fetch(again, require_stable=True) == (30, 0)


@async_test
async def test_a_commit_for_a_member_of_an_old_generation_is_refused() -> None:
    _, client, _ = await setup()
    # KIP-447 (v3+): a named member must belong to the group.
    refused = await txn_commit(client, 5, generation_id=1, member_id="zombie")
    assert refused.topics[0].partitions[0].error_code.value == 25  # UNKNOWN_MEMBER_ID
    assert await fetch(client) == (-1, 0)


@async_test
async def test_a_control_record_that_is_no_marker_ends_no_transaction_on_reload() -> None:
    core, client, coordinator = await setup()
    partition = coordinator.partition_for("g")
    await txn_commit(client, 10)
    core.write_marker(OFFSETS_TOPIC, partition, PRODUCER_ID, commit=False)
    core.logs[(OFFSETS_TOPIC, partition)][-1]["control"] = 5  # neither ABORT nor COMMIT
    await coordinator.close()

    controller = FakeController()
    controller.add_topic("in", 2)
    reloaded = await start_coordinator(core=core, controller=controller, clock=FakeClock())
    again = Client(reloaded, core=core)
    # Still pending: the unknown control record was skipped, not taken for an abort.
    assert await fetch(again, require_stable=True) == (-1, 88)
    await marker(again, partition, commit=True)
    assert await fetch(again, require_stable=True) == (10, 0)
