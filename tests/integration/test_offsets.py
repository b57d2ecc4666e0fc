"""Topic auto-creation on produce, and ListOffsets: earliest, latest and by timestamp."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_END, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition

from .clients import CLIENTS_BY_NAME, produce_samples
from .clients.confluent import (
    ADMIN_TIMEOUT_S,
    assigned_consumer,
    create_topic,
    partition_count,
    watermarks,
)
from .records import ProducedBatch

RECORD_COUNT = 10
confluent = CLIENTS_BY_NAME["confluent-kafka"]


def produce_unassigned(bootstrap: str, topic: str, count: int, timeout_ms: int) -> list:
    """Produce `count` records letting the client pick partitions; their delivery errors."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": timeout_ms})
    outcomes: list[KafkaError | None] = []
    for i in range(count):
        key = f"key-{i}".encode()
        producer.produce(topic, key=key, value=b"v", on_delivery=lambda e, _: outcomes.append(e))
    producer.flush(timeout_ms / 1000 + 10)
    assert len(outcomes) == count, "missing delivery reports"
    return outcomes


def test_producing_to_a_new_topic_creates_it_with_num_partitions(broker_factory) -> None:
    broker = broker_factory({"num.partitions": "3"})

    errors = produce_unassigned(broker.bootstrap, "born-on-produce", 30, timeout_ms=30_000)

    assert errors == [None] * 30
    assert partition_count(broker.bootstrap, "born-on-produce") == 3
    assert sum(watermarks(broker.bootstrap, "born-on-produce", p)[1] for p in range(3)) == 30


def test_no_topic_is_created_when_auto_create_is_off(broker_factory) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})

    errors = produce_unassigned(broker.bootstrap, "not-wanted", 1, timeout_ms=3_000)

    assert errors[0] is not None
    assert partition_count(broker.bootstrap, "not-wanted") is None


@pytest.fixture(scope="module", params=["none", "lz4"])
def timestamped(request, module_broker) -> tuple[str, ProducedBatch]:
    """A topic holding records one second apart; with lz4 they share compressed batches."""
    topic = f"timestamped-{request.param}"
    create_topic(module_broker.bootstrap, topic)
    produced = produce_samples(
        confluent, module_broker.bootstrap, topic, count=RECORD_COUNT, codec=request.param
    )
    return topic, produced


def test_earliest_and_latest_offsets(module_broker, timestamped) -> None:
    topic, _ = timestamped

    assert watermarks(module_broker.bootstrap, topic, 0) == (0, RECORD_COUNT)


def test_offsets_for_times_with_confluent_kafka(module_broker, timestamped) -> None:
    topic, produced = timestamped
    first_ms = produced.records[0].timestamp
    assert first_ms is not None
    consumer = assigned_consumer(module_broker.bootstrap, topic, 0)
    queries = {
        first_ms - 60_000: 0,  # before everything: the first record
        first_ms: 0,
        first_ms + 2_500: 3,  # between two records: the first one after
        first_ms + 7_000: 7,  # exact hit
        first_ms + 60_000: OFFSET_END,  # after everything: no such record
    }
    try:
        # One query per call: librdkafka answers one timestamp per partition and request.
        found = {
            timestamp: consumer.offsets_for_times(
                [TopicPartition(topic, 0, timestamp)], timeout=ADMIN_TIMEOUT_S
            )[0].offset
            for timestamp in queries
        }
    finally:
        consumer.close()

    assert found == queries


def test_offsets_for_times_with_kafka_python(module_broker, timestamped) -> None:
    topic, produced = timestamped
    first_ms = produced.records[0].timestamp
    assert first_ms is not None
    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None)
    partition = KafkaPythonTopicPartition(topic, 0)
    try:
        hit = consumer.offsets_for_times({partition: first_ms + 4_200}, timeout_ms=30_000)
        miss = consumer.offsets_for_times({partition: first_ms + 60_000}, timeout_ms=30_000)
        earliest = consumer.beginning_offsets([partition], timeout_ms=30_000)
        latest = consumer.end_offsets([partition], timeout_ms=30_000)
    finally:
        consumer.close()

    assert (hit[partition].offset, hit[partition].timestamp) == (5, first_ms + 5_000)
    assert miss[partition] is None
    assert (earliest[partition], latest[partition]) == (0, RECORD_COUNT)
