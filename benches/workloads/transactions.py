"""Transactional produce: throughput with transactions of a given size, and the time
`commit_transaction` takes (the coordinator's two-phase commit: EndTxn, the PrepareCommit
write, the markers on every partition, the CompleteCommit write).

One librdkafka transactional producer, 1 KiB records, acks=all (transactions imply it), a topic
of 8 partitions so that each commit writes markers to several partitions.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Producer


@dataclass(frozen=True)
class TransactionsResult:
    mb_per_s: float
    commit_ms: list[float]

    def commit_percentile(self, fraction: float) -> float:
        ordered = sorted(self.commit_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def produce_in_transactions(
    bootstrap: str,
    topic: str,
    records_per_transaction: int,
    total_records: int,
    record_bytes: int = 1024,
) -> TransactionsResult:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.init_transactions(60)
    value = b"x" * record_bytes
    transactions = max(1, total_records // records_per_transaction)
    commits: list[float] = []
    started = time.monotonic()
    for _ in range(transactions):
        producer.begin_transaction()
        for _ in range(records_per_transaction):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        before = time.monotonic()
        producer.commit_transaction(60)
        commits.append((time.monotonic() - before) * 1000)
    elapsed = time.monotonic() - started
    sent = transactions * records_per_transaction * record_bytes
    return TransactionsResult(sent / elapsed / 1_000_000, commits)
