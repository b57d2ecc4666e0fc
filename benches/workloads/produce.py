"""Produce throughput: Kafka's ProducerPerformance and a confluent-kafka (librdkafka) producer."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Producer

from workloads.java_tools import JavaTools

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


@dataclass(frozen=True)
class ProduceCase:
    record_bytes: int
    acks: str  # "1" or "all"
    partitions: int
    compression: str  # "none" or "lz4"

    @property
    def idempotent(self) -> bool:
        # The idempotent producer requires acks=all (KIP-679 made it the default with
        # acks=all); with acks=1 it has to be off.
        return self.acks == "all"

    @property
    def label(self) -> str:
        size = (
            f"{self.record_bytes // 1024}KiB"
            if self.record_bytes >= 1024
            else (f"{self.record_bytes}B")
        )
        idem = "+idem" if self.idempotent else ""
        return f"{size} acks={self.acks}{idem} p{self.partitions} {self.compression}"

    def client_properties(self) -> dict[str, str]:
        return {
            "acks": self.acks,
            "enable.idempotence": str(self.idempotent).lower(),
            "compression.type": self.compression,
        }


@dataclass(frozen=True)
class ProduceResult:
    records: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


def produce_with_java(
    tools: JavaTools, bootstrap: str, topic: str, case: ProduceCase, records: int
) -> ProduceResult:
    properties = {"bootstrap.servers": bootstrap, **case.client_properties()}
    output = tools.run(
        PRODUCER_PERFORMANCE,
        [
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(case.record_bytes),
            "--throughput",
            "-1",
            "--producer-props",
            *(f"{key}={value}" for key, value in properties.items()),
        ],
        timeout_s=600,
    )
    summaries = _SUMMARY.findall(output)
    if not summaries:
        raise RuntimeError(f"no summary in ProducerPerformance output: {output[-500:]}")
    sent, per_second, _ = summaries[-1]
    seconds = int(sent) / float(per_second)
    return ProduceResult(int(sent), int(sent) * case.record_bytes, seconds)


POLL_EVERY = 1000


def produce_with_librdkafka(
    bootstrap: str,
    topic: str,
    case: ProduceCase,
    records: int,
    client_config: Mapping[str, str] | None = None,
) -> ProduceResult:
    """`client_config`: extra librdkafka settings (e.g. TLS)."""
    properties = case.client_properties()
    failures: list[str] = []

    def on_delivery(error: object, _message: object) -> None:
        failures.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": properties["acks"],
            "enable.idempotence": case.idempotent,
            "compression.type": properties["compression.type"],
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            # A Python callback per delivered record costs the single-threaded load generator
            # more than the broker's whole share at 100 B records: report failures only.
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            **(client_config or {}),
        }
    )

    # Random capitals, like ProducerPerformance, so lz4 finds similar redundancy.
    payload = bytes(random.choices(range(65, 91), k=case.record_bytes))
    started = time.monotonic()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
        # Serving delivery reports in bulk keeps the Python loop from being the bottleneck.
        if index % POLL_EVERY == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    seconds = time.monotonic() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, {len(failures)} failed: {failures[:3]}")
    return ProduceResult(records, records * case.record_bytes, seconds)
