"""confluent-kafka (librdkafka): producer, assign()-only consumer, shared admin helpers."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import (
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from ..records import Consumed, Record

ADMIN_TIMEOUT_S = 30.0
# Consumer groups are not supported yet: librdkafka wants a group.id, but with assign() and no
# commits it never needs the group coordinator.
UNUSED_GROUP_ID = "krust-tests-unused-group"


class DeliveryFailedError(AssertionError):
    pass


class ConfluentKafkaClient:
    name = "confluent-kafka"
    per_record_headers = True
    sets_timestamps = True

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 30_000,
            }
        )
        errors: list[KafkaError] = []

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                errors.append(error)

        for record in records:
            producer.produce(
                topic,
                value=record.value,
                key=record.key,
                partition=partition,
                timestamp=record.timestamp or 0,
                headers=list(record.headers),
                on_delivery=on_delivery,
            )
            producer.poll(0)
        undelivered = producer.flush(60)
        if undelivered or errors:
            raise DeliveryFailedError(f"{undelivered} undelivered, errors: {errors[:5]}")

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        consumer = assigned_consumer(bootstrap, topic, partition)
        try:
            return poll_records(consumer, count, timeout_s)
        finally:
            consumer.close()


def assigned_consumer(
    bootstrap: str, topic: str, partition: int, start_offset: int = 0, **config: object
) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": UNUSED_GROUP_ID,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, partition, start_offset)])
    return consumer


def poll_records(consumer: Consumer, count: int, timeout_s: float) -> list[Consumed]:
    """Poll until `count` records arrived or `timeout_s` passed; fatal errors raise."""
    consumed: list[Consumed] = []
    deadline = time.monotonic() + timeout_s
    while len(consumed) < count and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=count - len(consumed), timeout=0.5):
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise AssertionError(f"fatal consumer error: {error}")
                continue
            _timestamp_type, timestamp = message.timestamp()
            record = Record(
                message.key(), message.value(), tuple(message.headers() or ()), timestamp
            )
            consumed.append(Consumed(message.offset(), record))
    return consumed


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    topic = NewTopic(
        name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
    )
    admin = admin_client(bootstrap)  # must outlive the future: a destroyed handle fails it
    admin.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S)[name].result(ADMIN_TIMEOUT_S)


def delete_records(bootstrap: str, topic: str, offset: int) -> int:
    """AdminClient.delete_records on partition 0: the new low watermark."""
    admin = admin_client(bootstrap)
    futures = admin.delete_records(
        [TopicPartition(topic, 0, offset)], request_timeout=ADMIN_TIMEOUT_S
    )
    (future,) = futures.values()
    return future.result(ADMIN_TIMEOUT_S).low_watermark


def partition_count(bootstrap: str, topic: str) -> int | None:
    """Partitions of `topic` per a fresh Metadata request, None if the broker does not know it."""
    metadata = admin_client(bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        return None
    return len(described.partitions)


def wait_for_partition_count(
    bootstrap: str, topic: str, expected: int | None, timeout_s: float = 10.0
) -> int | None:
    """Re-read metadata until `topic` has `expected` partitions (None: is gone) or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = partition_count(bootstrap, topic)
        if seen == expected or time.monotonic() >= deadline:
            return seen
        time.sleep(0.2)


def parse_topic_id(text: str) -> uuid.UUID:
    """A Kafka Uuid from its base64 form: librdkafka prints standard, Java URL-safe base64."""
    return uuid.UUID(
        bytes=base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "==")
    )


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = admin_client(bootstrap)
    described = admin.describe_topics(TopicCollection([topic]), request_timeout=ADMIN_TIMEOUT_S)
    return parse_topic_id(str(described[topic].result(timeout=ADMIN_TIMEOUT_S).topic_id))


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(earliest, latest) offsets via ListOffsets. The consumer is not assigned the partition:
    one that also fetched it, from offset 0 below a moved log start, could hang librdkafka's
    close (seen after retention or DeleteRecords moved the log start)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": UNUSED_GROUP_ID, "enable.auto.commit": False}
    )
    try:
        return consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=ADMIN_TIMEOUT_S, cached=False
        )
    finally:
        consumer.close()
