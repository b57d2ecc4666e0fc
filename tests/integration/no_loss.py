"""The no-loss checker: an idempotent acks=all producer writes numbered records while faults
are injected, remembering which the cluster acknowledged; afterwards everything is read back
and checked: no acknowledged record lost, none duplicated, each partition in order.

A record's value is `<partition>:<sequence>`, the sequence counting up per partition from 0 in
the order the producer sent them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from types import TracebackType

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import Cluster

RF = 3
MIN_INSYNC_REPLICAS = 2
# Well inside pytest's per-test ceiling; a delivery still pending then is reported as failed.
DELIVERY_TIMEOUT_MS = 120_000
PROGRESS_TIMEOUT_S = 90.0
READ_TIMEOUT_S = 120.0
# Between two sends: a steady few hundred records a second, so that a test's records stay
# few enough to read back in seconds.
SEND_INTERVAL_S = 0.002

# Tries of a topic creation whose admin client timed out finding the controller.
CREATE_ATTEMPTS = 3
CREATE_TIMEOUT_S = 15.0


def create_replicated_topic(cluster: Cluster, topic: str, partitions: int) -> None:
    """RF=3, min.insync.replicas=2; returns once every partition has a leader."""
    config = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)}
    for attempt in range(CREATE_ATTEMPTS):
        admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
        new = NewTopic(topic, partitions, RF, config=config)
        try:
            admin.create_topics([new], request_timeout=CREATE_TIMEOUT_S)[topic].result(
                CREATE_TIMEOUT_S + 5
            )
            break
        except (KafkaException, TimeoutError) as error:
            # librdkafka's admin client can wait on the "controller" broker that just died
            # (its metadata still names it); a new client asks a live broker again.
            timed_out = isinstance(error, TimeoutError) or (
                error.args[0].code() == KafkaError._TIMED_OUT
            )
            if not timed_out or attempt + 1 == CREATE_ATTEMPTS:
                raise
    for partition in range(partitions):
        cluster.partition_leader(topic, partition)


@dataclass
class NumberedProducer:
    """Sends numbered records round-robin over `partitions` from a thread until stopped."""

    bootstrap: str
    topic: str
    partitions: int
    acknowledged: dict[int, list[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def __enter__(self) -> NumberedProducer:
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": DELIVERY_TIMEOUT_MS,
                "error_cb": self._on_error,
            }
        )
        sequences = [0] * self.partitions
        sent = 0
        while not self._stopping.is_set():
            partition = sent % self.partitions
            value = f"{partition}:{sequences[partition]}".encode()
            producer.produce(self.topic, value=value, partition=partition, on_delivery=self._on_ack)
            sequences[partition] += 1
            sent += 1
            producer.poll(SEND_INTERVAL_S)
        left = producer.flush(DELIVERY_TIMEOUT_MS / 1000)
        if left:
            self._fail(f"{left} records still unacknowledged at the end")

    def _fail(self, failure: str) -> None:
        with self._lock:
            self.failures.append(failure)

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fail(f"fatal producer error: {error}")

    def _on_ack(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._fail(f"delivery failed: {error}")
            return
        partition, sequence = (int(part) for part in (message.value() or b"").split(b":"))
        with self._lock:
            self.acknowledged.setdefault(partition, []).append(sequence)

    def acknowledged_count(self) -> int:
        with self._lock:
            return sum(len(sequences) for sequences in self.acknowledged.values())

    def wait_acknowledged(self, more: int, timeout_s: float = PROGRESS_TIMEOUT_S) -> None:
        """Until `more` further records are acknowledged: writes go on."""
        target = self.acknowledged_count() + more
        deadline = time.monotonic() + timeout_s
        while self.acknowledged_count() < target:
            assert not self.failures, self.failures[:5]
            assert time.monotonic() < deadline, (
                f"{self.topic}: fewer than {more} records acknowledged in {timeout_s:.0f} s "
                f"({self.acknowledged_count()} in all)"
            )
            time.sleep(0.05)

    def stop(self) -> dict[int, list[int]]:
        """Stop sending, wait for every pending acknowledgement; what was acknowledged."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        return self.acknowledged


def read_back(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """Every record of every partition up to its high watermark: sequences in log order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"no-loss-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        read: dict[int, list[int]] = {p: [] for p in range(partitions)}
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(positions[p] < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"{topic}: read {positions} of {ends}"
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                partition, sequence = (int(part) for part in (message.value() or b"").split(b":"))
                assert partition == message.partition(), message.value()
                read[partition].append(sequence)
                positions[partition] = (message.offset() or 0) + 1
        return read
    finally:
        consumer.close()


def no_loss_problems(acknowledged: dict[int, list[int]], read: dict[int, list[int]]) -> list[str]:
    """What went wrong: acknowledged records missing, records read twice, out of order."""
    problems = []
    for partition, sequences in sorted(read.items()):
        duplicates = len(sequences) - len(set(sequences))
        if duplicates:
            problems.append(f"partition {partition}: {duplicates} records read more than once")
        if any(later <= earlier for earlier, later in pairwise(sequences)):
            problems.append(f"partition {partition}: records out of the order they were sent")
    for partition, sequences in sorted(acknowledged.items()):
        lost = sorted(set(sequences) - set(read.get(partition, [])))
        if lost:
            problems.append(
                f"partition {partition}: {len(lost)} acknowledged records lost, first {lost[:10]}"
            )
    return problems


def assert_no_loss(cluster: Cluster, producer: NumberedProducer) -> None:
    """Stop the producer, read the topic back, and check it."""
    acknowledged = producer.stop()
    assert not producer.failures, producer.failures[:5]
    read = read_back(cluster.live_bootstrap(), producer.topic, producer.partitions)
    problems = no_loss_problems(acknowledged, read)
    # This module is not rewritten by pytest: say what was wrong.
    assert problems == [], problems
