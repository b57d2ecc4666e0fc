"""End-to-end latency: produce at a fixed rate well below saturation, time until consumed.

The topic must be new and empty (one partition): the consumer reads it from the start.

Producer and consumer live in one process, so the send time written into each record and
the receive time come from the same monotonic clock.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

_STAMP = struct.Struct(">q")


@dataclass(frozen=True)
class LatencyResult:
    samples_ms: list[float]

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _warm_up(producer: Producer, consumer: Consumer, topic: str) -> None:
    """One round trip first, so connection set-up is not counted as latency."""
    producer.produce(topic, _STAMP.pack(0), partition=0)
    producer.flush(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if consumer.consume(num_messages=1, timeout=0.5):
            return
    raise RuntimeError("latency warm-up record never arrived")


def measure_end_to_end(
    bootstrap: str, topic: str, rate_per_s: int, seconds: float, record_bytes: int = 1024
) -> LatencyResult:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    expected = int(rate_per_s * seconds)
    samples: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while len(samples) < expected and not done.is_set():
            # poll, not a batch consume: a batch call waits out its timeout to fill up.
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                sent_ns = _STAMP.unpack_from(message.value() or b"")[0]
                samples.append((time.monotonic_ns() - sent_ns) / 1e6)

    _warm_up(producer, consumer, topic)
    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    padding = b"x" * (record_bytes - _STAMP.size)
    interval_ns = 1_000_000_000 // rate_per_s
    next_send = time.monotonic_ns()
    for _ in range(expected):
        while (now := time.monotonic_ns()) < next_send:
            producer.poll(max(0.0, (next_send - now) / 1e9))
        producer.produce(topic, _STAMP.pack(time.monotonic_ns()) + padding, partition=0)
        producer.poll(0)
        next_send += interval_ns
    producer.flush(30)
    receiver.join(timeout=30)
    done.set()
    receiver.join()
    consumer.close()
    if len(samples) < expected * 0.99:
        raise RuntimeError(f"latency: received {len(samples)} of {expected} records")
    return LatencyResult(samples)
