"""kafka-python 3.x: idempotent producer (its default, kept on) and a group-less consumer."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..records import Consumed, Record


def kafka_python_codec(codec: str) -> str | None:
    return None if codec == "none" else codec


class KafkaPythonClient:
    name = "kafka-python"
    per_record_headers = True
    sets_timestamps = True

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=kafka_python_codec(codec),
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            request_timeout_ms=10_000,
            max_block_ms=30_000,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    value=record.value,
                    key=record.key,
                    partition=partition,
                    headers=list(record.headers),
                    timestamp_ms=record.timestamp,
                )
                for record in records
            ]
            producer.flush(timeout=60)
            for future in futures:
                future.get(timeout=30)
        finally:
            producer.close(timeout=10)

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            assigned = TopicPartition(topic, partition)
            consumer.assign([assigned])
            consumer.seek(assigned, 0)
            consumed: list[Consumed] = []
            deadline = time.monotonic() + timeout_s
            while len(consumed) < count and time.monotonic() < deadline:
                for message in consumer.poll(timeout_ms=500).get(assigned, []):
                    record = Record(
                        message.key, message.value, tuple(message.headers), message.timestamp
                    )
                    consumed.append(Consumed(message.offset, record))
            return consumed[:count]
        finally:
            consumer.close()
