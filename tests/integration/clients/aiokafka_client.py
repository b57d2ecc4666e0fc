"""aiokafka: idempotent producer and a group-less consumer, each run in its own event loop."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ..records import Consumed, Record


class AiokafkaClient:
    name = "aiokafka"
    per_record_headers = True
    sets_timestamps = True

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        asyncio.run(asyncio.wait_for(_produce(bootstrap, topic, partition, records, codec), 90))

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        consuming = _consume(bootstrap, topic, partition, count, timeout_s)
        return asyncio.run(asyncio.wait_for(consuming, timeout_s + 30))


async def _produce(
    bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=10_000,
    )
    await producer.start()
    try:
        deliveries = [
            await producer.send(
                topic,
                value=record.value,
                key=record.key,
                partition=partition,
                timestamp_ms=record.timestamp,
                headers=list(record.headers),
            )
            for record in records
        ]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


async def _consume(
    bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
) -> list[Consumed]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        assigned = TopicPartition(topic, partition)
        consumer.assign([assigned])
        consumer.seek(assigned, 0)
        consumed: list[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while len(consumed) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(assigned, timeout_ms=500)
            for message in batches.get(assigned, []):
                record = Record(
                    message.key, message.value, tuple(message.headers), message.timestamp
                )
                consumed.append(Consumed(message.offset, record))
        return consumed[:count]
    finally:
        await consumer.stop()
