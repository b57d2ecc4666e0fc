"""Consume throughput from the start of a topic: ConsumerPerformance and confluent-kafka."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from workloads.java_tools import JavaTools

CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
_MIB = 1024 * 1024


@dataclass(frozen=True)
class ConsumeResult:
    records: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def consume_with_java(tools: JavaTools, bootstrap: str, topic: str, records: int) -> ConsumeResult:
    output = tools.run(
        CONSUMER_PERFORMANCE,
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--group",
            f"bench-{uuid.uuid4().hex[:8]}",
            "--timeout",
            "60000",
        ],
        timeout_s=900,
    )
    lines = [line for line in output.splitlines() if line.strip()]
    header = [name.strip() for name in lines[-2].split(",")]
    values = dict(zip(header, (value.strip() for value in lines[-1].split(",")), strict=True))
    consumed_records = int(values["data.consumed.in.nMsg"])
    if consumed_records < records:
        raise RuntimeError(f"ConsumerPerformance read {consumed_records} of {records}")
    consumed_bytes = int(float(values["data.consumed.in.MB"]) * _MIB)
    # fetch.time.ms leaves out joining the group, which is not what this workload measures.
    seconds = int(values["fetch.time.ms"]) / 1000
    return ConsumeResult(consumed_records, consumed_bytes, seconds)


def consume_with_librdkafka(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    client_config: Mapping[str, str] | None = None,
) -> ConsumeResult:
    """`client_config`: extra librdkafka settings (e.g. TLS)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * _MIB,
            **(client_config or {}),
        }
    )
    consumer.assign(
        [TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in range(partitions)]
    )
    consumed_records = consumed_bytes = 0
    started = time.monotonic()
    deadline = started + 600
    try:
        while consumed_records < records and time.monotonic() < deadline:
            for message in consumer.consume(
                num_messages=min(10_000, records - consumed_records), timeout=1.0
            ):
                if message.error() is not None:
                    raise RuntimeError(f"consume error: {message.error()}")
                consumed_records += 1
                consumed_bytes += len(message.value() or b"")
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    if consumed_records < records:
        raise RuntimeError(f"confluent-kafka read {consumed_records} of {records} in 600 s")
    return ConsumeResult(consumed_records, consumed_bytes, seconds)
