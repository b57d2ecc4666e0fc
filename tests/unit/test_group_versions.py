"""The newest group API versions Kafka 4 serves: OffsetCommit/OffsetFetch v10 name topics by id
(resolved through the controller's image), DescribeGroups v6 reports a missing group."""

from __future__ import annotations

import uuid

from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.group import FakeController, async_test, start_coordinator
from .test_group_handlers import Client

UNKNOWN_ID = uuid.UUID(int=42)


def commit(topic_id: uuid.UUID, offset: int) -> dict[str, object]:
    return {
        "topic_id": topic_id,
        "partitions": [
            {
                "partition_index": 1,
                "committed_offset": offset,
                "committed_leader_epoch": 2,
                "committed_metadata": "m",
            }
        ],
    }


@async_test
async def test_offsets_v10_name_topics_by_id() -> None:
    controller = FakeController()
    orders = controller.add_topic("orders", 2).topic_id
    client = Client(await start_coordinator(controller=controller, clock=FakeClock()))

    committed = await client.send(
        8,
        10,
        {
            "group_id": "simple",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [commit(UNKNOWN_ID, 5), commit(orders, 7)],
        },
    )
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in committed.topics
    ] == [(UNKNOWN_ID, [(1, ErrorCode.unknown_topic_id)]), (orders, [(1, ErrorCode.none)])]

    # The commit is stored by name: older versions see it under the topic's name.
    by_name = await client.send(
        9, 9, {"groups": [{"group_id": "simple", "topics": None}], "require_stable": False}
    )
    assert [(t.name, t.partitions[0].committed_offset) for t in by_name.groups[0].topics] == [
        ("orders", 7)
    ]

    fetched = await client.send(
        9,
        10,
        {
            "groups": [
                {
                    "group_id": "simple",
                    "topics": [
                        {"topic_id": orders, "partition_indexes": [0, 1]},
                        {"topic_id": UNKNOWN_ID, "partition_indexes": [3]},
                    ],
                },
                {"group_id": "simple", "topics": None},
            ],
            "require_stable": False,
        },
    )
    requested, every = fetched.groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in requested.topics
    ] == [
        (orders, [(0, -1, ErrorCode.none), (1, 7, ErrorCode.none)]),
        (UNKNOWN_ID, [(3, -1, ErrorCode.unknown_topic_id)]),
    ]
    assert [(t.topic_id, len(t.partitions)) for t in every.topics] == [(orders, 1)]
    assert every.topics[0].partitions[0].committed_leader_epoch == 2


@async_test
async def test_describe_groups_v6_reports_a_missing_group() -> None:
    client = Client(await start_coordinator(controller=FakeController(), clock=FakeClock()))
    request = {"groups": ["absent"], "include_authorized_operations": False}
    [v6] = (await client.send(15, 6, request)).groups
    assert (v6.error_code, v6.error_message, v6.group_state) == (
        ErrorCode.group_id_not_found,
        "Group absent not found.",
        "Dead",
    )
    [v5] = (await client.send(15, 5, request)).groups
    assert (v5.error_code, v5.group_state) == (ErrorCode.none, "Dead")
