"""The transaction APIs through kio, the way the bridge calls them: versions, error mapping,
AddPartitionsToTxn's checks and batches, FindCoordinator for transactional ids."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as E
from krust.bridge.routes import Exposure
from krust.coordinator.partitioner import partition_for
from krust.group.api_membership import MembershipApis
from krust.group.records import OFFSETS_TOPIC
from krust.plugins.authorizer import (
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    AuthorizerContext,
)
from krust.security.authorization import Authorization
from krust.transaction.api import TransactionApis
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.install import install

from .doubles.clock import FakeClock
from .doubles.group import FakeCore, async_test
from .doubles.group import start_coordinator as start_group_coordinator
from .doubles.transaction import Client, FakeTxnCore, TxnController, start_coordinator

EXPECTED_ROUTES = {22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 5), 65: (0, 0), 66: (0, 2)}


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(k, v) for k, (low, high) in EXPECTED_ROUTES.items() for v in range(low, high + 1)],
)
def test_every_advertised_version_has_kio_schemas(api_key: int, version: int) -> None:
    assert load_request_schema(api_key, version) is not None
    assert load_response_schema(api_key, version) is not None


async def served() -> tuple[TransactionCoordinator, Client, Client]:
    controller = TxnController()
    controller.add_topic("orders", 2)
    coordinator = await start_coordinator(controller=controller, clock=FakeClock())
    apis = TransactionApis(coordinator)
    assert {k: (lo, hi) for k, lo, hi, _ in apis.routes()} == EXPECTED_ROUTES
    return coordinator, Client(apis), Client(apis, internal=True)


def init(version: int, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": "tx",
        "transaction_timeout": 60_000,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


def add_v3(producer_id: int, epoch: int, *topics: tuple[str, list[int]]) -> dict[str, Any]:
    return {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": producer_id,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics],
    }


def errors_v3(response: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in response.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


@async_test
async def test_a_java_producers_transaction_on_current_versions() -> None:
    coordinator, client, _ = await served()
    found = await client.send(22, 5, init(5))
    assert (found.error_code, found.producer_id, found.producer_epoch) == (E.none, 1000, 0)
    added = await client.send(24, 3, add_v3(1000, 0, ("orders", [0, 1])))
    assert errors_v3(added) == {("orders", 0): E.none, ("orders", 1): E.none}
    offsets = await client.send(
        25, 4, {"transactional_id": "tx", "producer_id": 1000, "producer_epoch": 0, "group_id": "g"}
    )
    assert offsets.error_code is E.none
    group_partition = (OFFSETS_TOPIC, partition_for("g", 50))
    assert group_partition in coordinator.describe("tx").partitions
    ended = await client.send(
        26,
        5,
        {"transactional_id": "tx", "producer_id": 1000, "producer_epoch": 0, "committed": True},
    )
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.none, 1000, 1)
    await coordinator.close()


@async_test
async def test_add_offsets_uses_the_partition_count_of_the_existing_offsets_topic() -> None:
    controller = TxnController()
    controller.add_topic(OFFSETS_TOPIC, 7, internal=True)
    coordinator = await start_coordinator(controller=controller, clock=FakeClock())
    client = Client(TransactionApis(coordinator))
    await client.send(22, 5, init(5))
    request = {"transactional_id": "tx", "producer_id": 1000, "producer_epoch": 0}
    for group in ("g", "orders-app", "other"):
        assert (await client.send(25, 1, {**request, "group_id": group})).error_code is E.none
    assert coordinator.describe("tx").partitions == tuple(
        sorted({(OFFSETS_TOPIC, partition_for(g, 7)) for g in ("g", "orders-app", "other")})
    )
    await coordinator.close()


@async_test
async def test_old_clients_get_invalid_producer_epoch_instead_of_producer_fenced() -> None:
    coordinator, client, _ = await served()
    await client.send(22, 0, init(0))
    await client.send(22, 0, init(0))  # epoch 1 now
    end = {"transactional_id": "tx", "producer_id": 1000, "producer_epoch": 0, "committed": True}
    assert (await client.send(26, 1, end)).error_code is E.invalid_producer_epoch
    assert (await client.send(26, 2, end)).error_code is E.producer_fenced
    stale = add_v3(1000, 0, ("orders", [0]))
    assert errors_v3(await client.send(24, 1, stale)) == {("orders", 0): E.invalid_producer_epoch}
    assert errors_v3(await client.send(24, 2, stale)) == {("orders", 0): E.producer_fenced}
    # KIP-360 InitProducerId with a stale producer id.
    assert (await client.send(22, 3, init(3, 77, 0))).error_code is E.invalid_producer_epoch
    assert (await client.send(22, 4, init(4, 77, 0))).error_code is E.producer_fenced
    assert (await client.send(22, 4, init(4, 1000, -1))).error_code is E.invalid_request
    await coordinator.close()


@async_test
async def test_unknown_topics_fail_the_whole_add() -> None:
    coordinator, client, _ = await served()
    await client.send(22, 5, init(5))
    added = await client.send(24, 3, add_v3(1000, 0, ("orders", [0, 9]), ("nope", [0])))
    assert errors_v3(added) == {
        ("orders", 0): E.operation_not_attempted,
        ("orders", 9): E.unknown_topic_or_partition,
        ("nope", 0): E.unknown_topic_or_partition,
    }
    assert coordinator.describe("tx").state == "Empty"
    await coordinator.close()


@async_test
async def test_brokers_verify_and_add_in_batches() -> None:
    coordinator, client, broker = await served()
    await client.send(22, 5, init(5))
    await client.send(24, 3, add_v3(1000, 0, ("orders", [0])))

    def transaction(tid: str, epoch: int, verify_only: bool) -> dict[str, Any]:
        return {
            "transactional_id": tid,
            "producer_id": 1000,
            "producer_epoch": epoch,
            "verify_only": verify_only,
            "topics": [{"name": "orders", "partitions": [0, 1]}],
        }

    verified = await broker.send(
        24, 4, {"transactions": [transaction("tx", 0, True), transaction("other", 0, True)]}
    )
    results = {
        r.transactional_id: {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.topic_results
            for p in t.results_by_partition
        }
        for r in verified.results_by_transaction
    }
    assert results == {
        "tx": {("orders", 0): E.none, ("orders", 1): E.transaction_abortable},
        "other": {("orders", 0): E.invalid_producer_id_mapping, ("orders", 1): 49},
    }
    # KIP-890 part 2: a broker adds the partition for a transaction-version-2 producer.
    await broker.send(24, 5, {"transactions": [transaction("tx", 0, False)]})
    assert len(coordinator.describe("tx").partitions) == 2
    _, entry = coordinator.state.lookup("tx")
    assert entry is not None and entry.metadata.client_transaction_version == 2
    await coordinator.close()


@async_test
async def test_describe_and_list_transactions() -> None:
    coordinator, client, _ = await served()
    await client.send(22, 5, init(5))
    await client.send(24, 3, add_v3(1000, 0, ("orders", [1])))
    described = await client.send(65, 0, {"transactional_ids": ["tx", "nobody"]}, decode=False)
    tx, nobody = described.transaction_states
    assert (tx.error_code, tx.transaction_state, tx.producer_id) == (E.none, "Ongoing", 1000)
    assert [(t.topic, list(t.partitions)) for t in tx.topics] == [("orders", [1])]
    assert nobody.error_code is E.transactional_id_not_found
    listed = await client.send(
        66, 1, {"state_filters": ["Ongoing", "Bogus"], "duration_filter": -1}
    )
    assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
    assert list(listed.unknown_state_filters) == ["Bogus"]
    by_pattern = await client.send(66, 2, {"transactional_id_pattern": "t.*"})
    assert [t.transactional_id for t in by_pattern.transaction_states] == ["tx"]
    none = await client.send(66, 2, {"transactional_id_pattern": "x.*"})
    assert list(none.transaction_states) == []
    bad = await client.send(66, 2, {"transactional_id_pattern": "("})
    assert bad.error_code is E.invalid_regular_expression
    await coordinator.close()


@async_test
async def test_find_coordinator_locates_transactional_ids() -> None:
    transactions = await start_coordinator(clock=FakeClock())
    groups = await start_group_coordinator()
    membership = MembershipApis(groups, transactions=transactions)
    from krust.bridge.dispatcher import RequestContext
    from krust.bridge.protocol import build_entity

    request = build_entity(
        load_request_schema(10, 4), {"key_type": 1, "coordinator_keys": ["tx", "other"]}
    )
    response = await membership.find_coordinator(
        request, RequestContext(10, 4, 1, "client", "127.0.0.1")
    )
    assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        ("tx", E.none, 1, 9091),
        ("other", E.none, 1, 9091),
    ]
    await transactions.close()
    await groups.close()


class DenyNames:
    """An authorizer plugin that denies every action on the named resources."""

    def __init__(self, *denied: str) -> None:
        self.denied = set(denied)

    def configure(self, configs: Mapping[str, str]) -> None:
        pass

    def start(self, context: AuthorizerContext) -> None:
        pass

    def close(self) -> None:
        pass

    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        return [
            AuthorizationResult.DENIED
            if a.resource.name in self.denied
            else AuthorizationResult.ALLOWED
            for a in actions
        ]


@async_test
async def test_kafkas_authorization_rules() -> None:
    controller = TxnController()
    controller.add_topic("orders", 1)
    controller.add_topic("hidden", 1)
    coordinator = await start_coordinator(controller=controller, clock=FakeClock())
    open_client = Client(TransactionApis(coordinator))
    await open_client.send(22, 5, {**init(5), "transactional_id": "secret"})
    await open_client.send(22, 5, init(5))
    client = Client(
        TransactionApis(coordinator, Authorization(DenyNames("secret", "hidden", "kafka-cluster")))
    )
    denied = await client.send(22, 5, {**init(5), "transactional_id": "secret"})
    assert denied.error_code is E.transactional_id_authorization_failed
    added = await client.send(24, 3, add_v3(1001, 0, ("orders", [0]), ("hidden", [0])))
    assert errors_v3(added) == {
        ("orders", 0): E.operation_not_attempted,
        ("hidden", 0): E.topic_authorization_failed,
    }
    internal_topic = await client.send(24, 3, add_v3(1001, 0, (OFFSETS_TOPIC, [0])))
    assert errors_v3(internal_topic) == {(OFFSETS_TOPIC, 0): E.topic_authorization_failed}
    batch = await client.send(24, 4, {"transactions": []})
    assert batch.error_code is E.cluster_authorization_failed
    listed = await client.send(66, 0, {})
    assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
    described = await client.send(65, 0, {"transactional_ids": ["secret"]}, decode=False)
    assert described.transaction_states[0].error_code is E.transactional_id_authorization_failed
    await coordinator.close()


class RecordingDispatcher:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.routes: dict[int, tuple[int, int]] = {}
        self.exposures: dict[int, Exposure] = {}

    def register(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        handler: Any,
        exposure: Exposure = Exposure.CLIENTS,
    ) -> None:
        assert api_key not in self.routes
        self.routes[api_key] = (min_version, max_version)
        self.exposures[api_key] = exposure


class Context:
    def __init__(self, core: FakeCore) -> None:
        self.config = {"transaction.state.log.num.partitions": 3}
        self.core = core
        self.controller = TxnController()
        self.dispatcher = RecordingDispatcher(asyncio.get_running_loop())
        self.authorization = Authorization(None)
        self.transactions: Any = None


@async_test
async def test_install_registers_the_apis_and_offers_the_coordinator_to_find_coordinator() -> None:
    ctx = Context(FakeTxnCore())
    coordinator = install(ctx)  # type: ignore[arg-type]
    assert ctx.transactions is coordinator
    assert ctx.dispatcher.routes == EXPECTED_ROUTES
    # The core keeps InitProducerId for idempotent producers and passes on transactional ones.
    assert ctx.dispatcher.exposures[22] is Exposure.INTERNAL
    assert ctx.dispatcher.exposures[24] is Exposure.CLIENTS
    await asyncio.sleep(0)  # start() runs on the loop
    await coordinator.close()
