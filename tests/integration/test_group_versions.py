"""The newest group API versions Kafka 4 serves, sent raw to a real broker (OffsetCommit and
OffsetFetch v10 by topic id, DescribeGroups v6), and Kafka's kafka-consumer-groups tool, which
uses the newest versions krust advertises, against a group with committed offsets."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer
from kio.schema.errors import ErrorCode

from .broker_process import BrokerProcess
from .clients.confluent import create_topic
from .groups_support import RawGroupConnection, wait_for_coordinator
from .kafka_cli import CONSUMER_GROUP_COMMAND, ToolRun, run_tool

METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
DESCRIBE_GROUPS = 15
UNKNOWN_ID = uuid.UUID(int=7)


def topic_id(connection: RawGroupConnection, name: str) -> uuid.UUID:
    fields = {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}]}
    fields |= {"allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    [topic] = connection.send(METADATA, 12, fields).topics
    return topic.topic_id


def test_offsets_v10_by_topic_id_and_describe_groups_v6(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "by-id", partitions=2)
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, "ids")
        known = topic_id(connection, "by-id")
        partition = {"committed_leader_epoch": -1, "committed_metadata": None}
        committed = connection.send(
            OFFSET_COMMIT,
            10,
            {
                "group_id": "ids",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "topic_id": known,
                        "partitions": [{"partition_index": 1, "committed_offset": 3, **partition}],
                    },
                    {
                        "topic_id": UNKNOWN_ID,
                        "partitions": [{"partition_index": 0, "committed_offset": 1, **partition}],
                    },
                ],
            },
        )
        fetched = connection.send(
            OFFSET_FETCH,
            10,
            {
                "groups": [
                    {"group_id": "ids", "member_id": None, "member_epoch": -1, "topics": None},
                    {
                        "group_id": "ids",
                        "member_id": None,
                        "member_epoch": -1,
                        "topics": [{"topic_id": UNKNOWN_ID, "partition_indexes": [0]}],
                    },
                ],
                "require_stable": False,
            },
        )
        described = connection.send(
            DESCRIBE_GROUPS, 6, {"groups": ["never-joined"], "include_authorized_operations": False}
        )
    finally:
        connection.close()
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in committed.topics] == [
        (known, [ErrorCode.none]),
        (UNKNOWN_ID, [ErrorCode.unknown_topic_id]),
    ]
    every, unknown = fetched.groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
        for t in every.topics
    ] == [(known, [(1, 3)])]
    assert [p.error_code for p in unknown.topics[0].partitions] == [ErrorCode.unknown_topic_id]
    [group] = described.groups
    assert (group.error_code, group.error_message) == (
        ErrorCode.group_id_not_found,
        "Group never-joined not found.",
    )


def consumer_groups(broker: BrokerProcess, *args: str) -> ToolRun:
    return run_tool(CONSUMER_GROUP_COMMAND, broker.bootstrap, *args)


def table(output: str) -> list[list[str]]:
    """The rows under the header line of a kafka-consumer-groups table."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line[0] == "GROUP")
    return lines[start + 1 :]


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    while seen < count:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()


def test_kafka_consumer_groups_lists_describes_resets_and_deletes(broker_factory) -> None:
    # consume_and_commit's group forms at once: no initial rebalance delay.
    broker: BrokerProcess = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, "lagging", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for number in range(10):
        producer.produce("lagging", value=str(number).encode(), partition=0)
    assert producer.flush(30) == 0
    consume_and_commit(broker.bootstrap, "tool-group", "lagging", 4)

    listed = consumer_groups(broker, "--list")
    assert listed.returncode == 0 and listed.stdout.split() == ["tool-group"]

    described = consumer_groups(broker, "--describe", "--group", "tool-group")
    assert described.returncode == 0, described.stderr
    assert "Consumer group 'tool-group' has no active members." in described.stderr
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    [row] = table(described.stdout)
    assert row[:6] == ["tool-group", "lagging", "0", "4", "10", "6"]

    state = consumer_groups(broker, "--describe", "--group", "tool-group", "--state")
    [row] = table(state.stdout)
    assert row[-2:] == ["Empty", "0"]

    reset = consumer_groups(
        broker,
        "--reset-offsets",
        "--group",
        "tool-group",
        "--topic",
        "lagging",
        "--to-offset",
        "8",
        "--execute",
    )
    assert reset.returncode == 0, reset.stderr
    assert table(reset.stdout) == [["tool-group", "lagging", "0", "8"]]
    [row] = table(consumer_groups(broker, "--describe", "--group", "tool-group").stdout)
    assert row[3:6] == ["8", "10", "2"]

    deleted = consumer_groups(broker, "--delete", "--group", "tool-group")
    assert deleted.stdout.strip() == (
        "Deletion of requested consumer groups ('tool-group') was successful."
    )
    assert consumer_groups(broker, "--list").stdout.split() == []
    # DescribeGroups v6 names the missing group, as Kafka 4 does.
    missing = consumer_groups(broker, "--describe", "--group", "tool-group")
    assert (
        "GroupIdNotFoundException: Group tool-group not found." in missing.stdout + missing.stderr
    )
