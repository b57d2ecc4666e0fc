"""Many partitions: create 10,000, produce to every one, report throughput and RSS.

The partitions are spread over topics of 1,000: one CreateTopics of 10,000 partitions would
be 10,001 metadata records, over the 10,000 a KRaft controller (Kafka's and krust's) accepts
in one operation."""

from __future__ import annotations

import time
from dataclasses import dataclass

from brokers import BrokerProcess
from confluent_kafka import Producer
from measure import PeakRssSampler, rss_bytes

from workloads.topics import create_topic

PARTITIONS_PER_TOPIC = 1000


@dataclass(frozen=True)
class ManyPartitionsResult:
    partitions: int
    create_s: float
    mb_per_s: float
    rss_after_create: int
    peak_rss: int


def many_partitions(
    broker: BrokerProcess, partitions: int, records_per_partition: int, record_bytes: int = 1024
) -> ManyPartitionsResult:
    topics = [
        (
            f"many-partitions-{first // PARTITIONS_PER_TOPIC}",
            min(PARTITIONS_PER_TOPIC, partitions - first),
        )
        for first in range(0, partitions, PARTITIONS_PER_TOPIC)
    ]
    started = time.monotonic()
    for topic, count in topics:
        create_topic(broker.bootstrap, topic, count, timeout_s=600)
    create_s = time.monotonic() - started
    rss_after_create = rss_bytes(broker.pid)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = b"x" * record_bytes
    total = partitions * records_per_partition
    with PeakRssSampler(broker.pid) as sampler:
        started = time.monotonic()
        for index in range(total):
            topic, count = topics[index % len(topics)]
            while True:
                try:
                    producer.produce(topic, payload, partition=(index // len(topics)) % count)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        if producer.flush(600):
            raise RuntimeError("many partitions: records left undelivered")
        seconds = time.monotonic() - started
    return ManyPartitionsResult(
        partitions,
        create_s,
        total * record_bytes / seconds / 1e6,
        rss_after_create,
        sampler.peak_bytes,
    )
