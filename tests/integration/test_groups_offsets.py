"""Committed group offsets survive a broker restart: a new member resumes exactly there, and the
commit metadata strings come back unchanged.

(confluent-kafka 2.16 sends its metadata with the C string's terminating NUL, so only it reads
its own metadata back unchanged; kafka-python's metadata is checked through both clients.)"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.structs import OffsetAndMetadata

from .clients.confluent import ADMIN_TIMEOUT_S, create_topic
from .groups_support import (
    GROUP_BROKER_OVERRIDES,
    RawGroupConnection,
    produce_numbered,
    wait_for_coordinator,
)

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
UNKNOWN_TOPIC_OR_PARTITION = 3
PARTITIONS = 3
PER_PARTITION = 10
TOPIC, GROUP = "committed", "group-committed"
# Partition p is committed at offset COMMITTED[p] with METADATA[p].
COMMITTED = {0: 3, 1: 7, 2: 0}
METADATA = {0: "checkpoint 0", 1: "ünïcødé ✓ checkpoint", 2: ""}


def group_consumer(bootstrap: str, group: str = GROUP) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def first_offsets_by_partition(consumer: Consumer, count: int) -> dict[int, int]:
    """Subscribe and consume `count` records; the first offset each partition delivered."""
    consumer.subscribe([TOPIC])
    first: dict[int, int] = {}
    seen = 0
    deadline = time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=count, timeout=0.2):
            if message.error() is None:
                first.setdefault(message.partition(), message.offset())
                seen += 1
    assert seen == count, f"consumed {seen} of {count} records"
    return first


def test_a_new_member_resumes_at_the_offsets_committed_before_a_broker_restart(
    broker_factory,
) -> None:
    broker = broker_factory(GROUP_BROKER_OVERRIDES)
    create_topic(broker.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_numbered(broker.bootstrap, TOPIC, range(PARTITIONS * PER_PARTITION), PARTITIONS)
    committing = group_consumer(broker.bootstrap)
    first_offsets_by_partition(committing, PARTITIONS * PER_PARTITION)
    committing.commit(
        offsets=[
            TopicPartition(TOPIC, p, offset, metadata=METADATA[p])
            for p, offset in COMMITTED.items()
        ],
        asynchronous=False,
    )
    committing.close()

    broker.stop()
    broker.restart()

    resuming = group_consumer(broker.bootstrap)
    try:
        committed = resuming.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=ADMIN_TIMEOUT_S
        )
        assert {tp.partition: (tp.offset, tp.metadata) for tp in committed} == {
            p: (COMMITTED[p], METADATA[p]) for p in range(PARTITIONS)
        }
        remaining = sum(PER_PARTITION - offset for offset in COMMITTED.values())
        assert first_offsets_by_partition(resuming, remaining) == COMMITTED
    finally:
        resuming.close()


def test_offsets_kafka_python_commits_without_joining_survive_a_restart(broker_factory) -> None:
    """An assign()-only consumer commits with generation -1 (Kafka's "simple" group); both
    clients read the offset back after the restart, kafka-python its metadata too."""
    broker = broker_factory(GROUP_BROKER_OVERRIDES)
    create_topic(broker.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_numbered(broker.bootstrap, TOPIC, range(PARTITIONS * PER_PARTITION), PARTITIONS)
    partition = KafkaPythonTopicPartition(TOPIC, 1)
    simple = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP)
    simple.assign([partition])
    simple.commit({partition: OffsetAndMetadata(5, METADATA[1], -1)})
    simple.close()

    broker.stop()
    broker.restart()

    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP)
    try:
        seen = reader.committed(partition, metadata=True)
        assert (seen.offset, seen.metadata) == (5, METADATA[1])
    finally:
        reader.close()
    confluent_reader = group_consumer(broker.bootstrap)
    try:
        (committed,) = confluent_reader.committed(
            [TopicPartition(TOPIC, 1)], timeout=ADMIN_TIMEOUT_S
        )
        # Only the offset: librdkafka copies fetched metadata without a terminating NUL and
        # confluent-kafka reads it as a C string, so metadata another client wrote (without
        # the NUL confluent-kafka itself appends) comes back with whatever bytes follow.
        assert committed.offset == 5
    finally:
        confluent_reader.close()


def test_a_commit_for_an_unknown_topic_or_partition_is_refused_and_the_rest_is_stored(
    broker_factory,
) -> None:
    broker = broker_factory(GROUP_BROKER_OVERRIDES)
    create_topic(broker.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_numbered(broker.bootstrap, TOPIC, range(PARTITIONS * PER_PARTITION), PARTITIONS)
    group = "raw-commit"
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, group)
        committed = connection.send(
            OFFSET_COMMIT,
            2,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,  # not a member: a "simple" group commit
                "member_id": "",
                "retention_time": -1,
                "topics": [
                    {"name": "no-such-topic", "partitions": [offset_at(0, 5)]},
                    {"name": TOPIC, "partitions": [offset_at(PARTITIONS, 5), offset_at(0, 4)]},
                ],
            },
        )
        fetched = connection.send(
            OFFSET_FETCH,
            1,
            {
                "group_id": group,
                "topics": [
                    {"name": "no-such-topic", "partition_indexes": [0]},
                    {"name": TOPIC, "partition_indexes": [0, PARTITIONS]},
                ],
            },
        )
    finally:
        connection.close()

    assert by_partition(committed, "error_code") == {
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, PARTITIONS): UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 0): 0,
    }
    assert by_partition(fetched, "committed_offset") == {
        ("no-such-topic", 0): -1,
        (TOPIC, 0): 4,
        (TOPIC, PARTITIONS): -1,
    }
    assert broker.running
    resuming = group_consumer(broker.bootstrap, group)
    try:
        remaining = PARTITIONS * PER_PARTITION - 4
        assert first_offsets_by_partition(resuming, remaining) == {0: 4, 1: 0, 2: 0}
    finally:
        resuming.close()


def offset_at(partition: int, offset: int) -> dict[str, object]:
    return {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}


def by_partition(response: object, field: str) -> dict[tuple[str, int], int]:
    return {
        (topic.name, partition.partition_index): getattr(partition, field)
        for topic in response.topics  # type: ignore[attr-defined]
        for partition in topic.partitions
    }
