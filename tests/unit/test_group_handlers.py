"""The group APIs on the wire: every advertised version decodes, answers and encodes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import build_entity, encode_entity
from krust.group.api_admin import AdminApis
from krust.group.api_consumer_group import ConsumerGroupApis
from krust.group.api_membership import MembershipApis
from krust.group.api_offsets import OffsetApis
from krust.group.api_txn_markers import TxnMarkerApis
from krust.group.api_txn_offsets import TxnOffsetApis
from krust.group.coordinator import GroupCoordinator
from krust.group.install import install
from krust.group.records import OFFSETS_TOPIC
from krust.security.authorization import Authorization

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeController,
    FakeCore,
    async_test,
    begin,
    fast_config,
    start_coordinator,
)

EXPECTED_ROUTES = {
    8: (2, 10),  # OffsetCommit: kio has no v0-v1
    9: (1, 10),  # OffsetFetch: kio has no v0
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 6),
    16: (0, 5),
    42: (0, 2),
    27: (1, 1),  # WriteTxnMarkers: the partition leader side of markers
    28: (0, 4),  # TxnOffsetCommit
    47: (0, 0),
    68: (0, 1),
    69: (0, 1),
}
# What librdkafka's balanced consumer needs to see overlapping the advertised ranges.
LIBRDKAFKA_NEEDS = {10: 0, 8: 2, 9: 1, 11: 0, 14: 0, 12: 0, 13: 0}


class RecordingDispatcher:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.routes: dict[int, tuple[int, int]] = {}

    def register(self, api_key: int, min_version: int, max_version: int, handler: Any) -> None:
        assert api_key not in self.routes
        self.routes[api_key] = (min_version, max_version)


class Context:
    def __init__(self, dispatcher: RecordingDispatcher, controller: FakeController) -> None:
        self.config = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
        self.core = FakeCore()
        self.controller = controller
        self.dispatcher = dispatcher
        self.authorization = Authorization(None)
        self.transactions = None


@async_test
async def test_install_registers_every_group_api_and_loads_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    dispatcher, controller = RecordingDispatcher(loop), FakeController()
    controller.add_topic(OFFSETS_TOPIC, 3, internal=True)
    coordinator = install(Context(dispatcher, controller))  # type: ignore[arg-type]
    assert dispatcher.routes == EXPECTED_ROUTES
    for api_key, version in LIBRDKAFKA_NEEDS.items():
        low, high = dispatcher.routes[api_key]
        assert low <= version <= high
    await asyncio.sleep(0)  # start() runs on the loop
    await coordinator.wait_loaded()
    assert coordinator.coordinator_error("g").name == "none"
    assert coordinator.partition_for("g") == 103 % 3  # "g".hashCode() == 103, 3 partitions
    await coordinator.close()


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(k, v) for k, (low, high) in EXPECTED_ROUTES.items() for v in range(low, high + 1)],
)
def test_every_advertised_version_has_kio_schemas(api_key: int, version: int) -> None:
    assert load_request_schema(api_key, version) is not None
    assert load_response_schema(api_key, version) is not None


class Client:
    """Sends requests through the handlers the way the bridge does: bytes in, bytes out."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        client_id: str = "rdkafka",
        core: FakeCore | None = None,
    ) -> None:
        self.client_id = client_id
        self._handlers: dict[int, Any] = {}
        for apis in (
            MembershipApis(coordinator),
            OffsetApis(coordinator),
            AdminApis(coordinator),
            TxnOffsetApis(coordinator),
            TxnMarkerApis(core or FakeCore(), coordinator),
            ConsumerGroupApis(coordinator),
        ):
            for api_key, _, _, handler in apis.routes():
                self._handlers[api_key] = handler

    async def send(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        encoded = encode_entity(build_entity(load_request_schema(api_key, version), fields))
        request, _ = entity_reader(load_request_schema(api_key, version))(encoded, 0)
        context = RequestContext(api_key, version, 1, self.client_id, "127.0.0.1")
        response = await self._handlers[api_key](request, context)
        response_type = load_response_schema(api_key, version)
        assert type(response) is response_type
        decoded, _ = entity_reader(response_type)(encode_entity(response), 0)
        return decoded


async def served(clock: FakeClock) -> GroupCoordinator:
    controller = FakeController()
    controller.add_topic("orders", 2)
    return await start_coordinator(controller=controller, clock=clock)


@async_test
async def test_librdkafka_classic_consumer_flow_on_oldest_versions() -> None:
    clock = FakeClock()
    coordinator = await served(clock)
    client = Client(coordinator)
    found = await client.send(10, 0, {"key": "group"})
    assert (found.error_code, found.node_id, found.host, found.port) == (
        0,
        1,
        "broker-1.test",
        9091,
    )

    join = await begin(
        client.send(
            11,
            0,
            {
                "group_id": "group",
                "session_timeout": 10_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"sub"}],
            },
        )
    )
    clock.advance(0)
    joined = await join
    assert joined.error_code == 0 and joined.generation_id == 1
    assert joined.protocol_name == "range" and joined.leader == joined.member_id
    member = joined.member_id
    assert coordinator.groups.groups["group"].members[member].rebalance_timeout_ms == 10_000

    synced = await client.send(
        14,
        0,
        {
            "group_id": "group",
            "generation_id": 1,
            "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"all"}],
        },
    )
    assert (synced.error_code, synced.assignment) == (0, b"all")
    beat = await client.send(12, 0, {"group_id": "group", "generation_id": 1, "member_id": member})
    assert beat.error_code == 0

    committed = await client.send(
        8,
        2,
        {
            "group_id": "group",
            "generation_id_or_member_epoch": 1,
            "member_id": member,
            "retention_time": -1,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
                        {"partition_index": 9, "committed_offset": 1, "committed_metadata": None},
                    ],
                }
            ],
        },
    )
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, 0),
        (9, 3),
    ]
    fetched = await client.send(
        9, 1, {"group_id": "group", "topics": [{"name": "orders", "partition_indexes": [0, 1]}]}
    )
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for p in fetched.topics[0].partitions
    ] == [(0, 42, "m", 0), (1, -1, "", 0)]

    left = await client.send(13, 0, {"group_id": "group", "member_id": member})
    assert left.error_code == 0
    gone = await client.send(13, 0, {"group_id": "group", "member_id": member})
    assert gone.error_code == 25  # UNKNOWN_MEMBER_ID, reported at the top for v0-v2


@async_test
async def test_modern_consumer_flow_on_newest_versions() -> None:
    clock = FakeClock()
    coordinator = await served(clock)
    client = Client(coordinator, client_id="java")
    found = await client.send(10, 6, {"key_type": 0, "coordinator_keys": ["group", "other"]})
    assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == [
        ("group", 0, 1),
        ("other", 0, 1),
    ]
    join_fields = {
        "group_id": "group",
        "session_timeout": 45_000,
        "rebalance_timeout": 300_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "cooperative-sticky", "metadata": b"sub"}],
        "reason": None,
    }
    required = await client.send(11, 9, join_fields)
    assert required.error_code == 79 and required.member_id.startswith("java-")
    join = await begin(client.send(11, 9, {**join_fields, "member_id": required.member_id}))
    clock.advance(0)
    joined = await join
    assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (
        0,
        "consumer",
        "cooperative-sticky",
    )
    assert not joined.skip_assignment
    member = joined.member_id
    synced = await client.send(
        14,
        5,
        {
            "group_id": "group",
            "generation_id": 1,
            "member_id": member,
            "protocol_type": "consumer",
            "protocol_name": "cooperative-sticky",
            "assignments": [{"member_id": member, "assignment": b"p0"}],
        },
    )
    assert (synced.error_code, synced.protocol_name, synced.assignment) == (
        0,
        "cooperative-sticky",
        b"p0",
    )
    committed = await client.send(
        8,
        9,
        {
            "group_id": "group",
            "generation_id_or_member_epoch": 1,
            "member_id": member,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 1,
                            "committed_offset": 7,
                            "committed_leader_epoch": 3,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    assert committed.topics[0].partitions[0].error_code == 0
    fetched = await client.send(
        9,
        9,
        {
            "groups": [
                {"group_id": "group", "topics": None},
                {"group_id": "nobody", "topics": [{"name": "orders", "partition_indexes": [0]}]},
            ],
            "require_stable": True,
        },
    )
    assert [
        (
            g.group_id,
            g.error_code,
            [
                (t.name, [(p.committed_offset, p.committed_leader_epoch) for p in t.partitions])
                for t in g.topics
            ],
        )
        for g in fetched.groups
    ] == [("group", 0, [("orders", [(7, 3)])]), ("nobody", 0, [("orders", [(-1, -1)])])]

    described = await client.send(
        15, 5, {"groups": ["group"], "include_authorized_operations": False}
    )
    [group] = described.groups
    assert (group.group_state, group.protocol_data) == ("Stable", "cooperative-sticky")
    assert [(m.client_id, m.client_host, m.member_assignment) for m in group.members] == [
        ("java", "/127.0.0.1", b"p0")
    ]
    listed = await client.send(16, 5, {"states_filter": ["Stable"], "types_filter": []})
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
        ("group", "Stable", "classic")
    ]
    left = await client.send(
        13,
        5,
        {"group_id": "group", "members": [{"member_id": member, "group_instance_id": None}]},
    )
    assert left.error_code == 0 and [m.error_code for m in left.members] == [0]
    deleted = await client.send(
        47,
        0,
        {
            "group_id": "group",
            "topics": [{"name": "orders", "partitions": [{"partition_index": 1}]}],
        },
    )
    assert deleted.error_code == 0
    assert [
        (r.group_id, r.error_code)
        for r in (await client.send(42, 2, {"groups_names": ["group"]})).results
    ] == [("group", 0)]


@async_test
async def test_find_coordinator_key_types() -> None:
    coordinator = await served(FakeClock())
    client = Client(coordinator)
    # Without a transaction coordinator no retry could succeed: not COORDINATOR_NOT_AVAILABLE.
    transaction = await client.send(10, 3, {"key": "txn", "key_type": 1})
    assert (transaction.error_code, transaction.node_id, transaction.port) == (42, -1, -1)
    bogus = await client.send(10, 4, {"key_type": 7, "coordinator_keys": ["x"]})
    assert bogus.coordinators[0].error_code == 42  # INVALID_REQUEST


@async_test
async def test_error_responses_encode_in_old_versions() -> None:
    coordinator = await served(FakeClock())
    client = Client(coordinator)
    for version in (0, 6):
        refused = await client.send(
            11,
            version,
            {
                "group_id": "group",
                "session_timeout": 1,
                "rebalance_timeout": 1,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [],
            },
        )
        assert (refused.error_code, refused.protocol_name, refused.generation_id) == (26, "", -1)


@async_test
async def test_offset_fetch_v1_reports_group_errors_per_partition() -> None:
    controller = FakeController()
    controller.add_topic(OFFSETS_TOPIC, 4, internal=True)
    coordinator = GroupCoordinator(
        fast_config(), FakeCore(), controller, FakeClock(), asyncio.get_running_loop()
    )
    client = Client(coordinator)
    fetched = await client.send(
        9, 1, {"group_id": "group", "topics": [{"name": "orders", "partition_indexes": [0, 1]}]}
    )
    assert [p.error_code for p in fetched.topics[0].partitions] == [14, 14]
    v2 = await client.send(9, 2, {"group_id": "group", "topics": None})
    assert (v2.error_code, v2.topics) == (14, ())


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(k, v) for k, (low, high) in EXPECTED_ROUTES.items() for v in range(low, high + 1)],
)
@async_test
async def test_every_version_answers_a_request_with_default_fields(
    api_key: int, version: int
) -> None:
    coordinator = await served(FakeClock())
    # All-default requests: empty group ids, no members, no topics. Each must still get a
    # well-formed answer of its own version (Client.send checks the type and re-decodes it).
    await Client(coordinator).send(api_key, version, {})
