"""Kafka's transactional copy system test, small: a copier consumes an input topic
(read_committed) and copies it to an output topic in transactions of about 100 records, with
its consumed offsets sent in the same transactions, while the broker is killed with kill -9 and
restarted several times. A read_committed reader of the output then sees exactly the input: no
record lost, none duplicated, in order per partition."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .broker_process import BrokerProcess
from .clients.confluent import create_topic

PARTITIONS = 2
PER_PARTITION = 1000
PER_TRANSACTION = 100
KILLS = 3
COPY_TIMEOUT_S = 240.0
# A healthy copier commits about every second.
STALL_S = 20.0
INPUT, OUTPUT, GROUP, TRANSACTIONAL_ID = "copy-input", "copy-output", "copier", "copier-txn"


def seed(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for partition in range(PARTITIONS):
        for number in range(PER_PARTITION):
            producer.produce(INPUT, f"{partition}:{number}".encode(), partition=partition)
            producer.poll(0)
    assert producer.flush(60) == 0


def copy(bootstrap: str, progress: Any, done: Any) -> None:
    """Copies until every input partition's committed offset is at its end. Any error closes
    both clients and starts again: the new producer fences and aborts the old transaction, the
    new consumer resumes at the committed offsets."""
    while not done.is_set():
        try:
            copy_until_done(bootstrap, progress, done)
        except KafkaException:
            time.sleep(0.5)


def copy_until_done(bootstrap: str, progress: Any, done: Any) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_ID,
            "transaction.timeout.ms": 10_000,
        }
    )
    try:
        producer.init_transactions(30)
        partitions = [TopicPartition(INPUT, p) for p in range(PARTITIONS)]
        consumer.assign(consumer.committed(partitions, timeout=30))
        while True:
            producer.begin_transaction()
            for message in consumer.consume(num_messages=PER_TRANSACTION, timeout=1.0):
                if message.error() is None:
                    producer.produce(OUTPUT, message.value(), partition=message.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            progress.value += 1
            if all(p.offset == PER_PARTITION for p in positions):
                done.set()
                return
    finally:
        consumer.close()
        producer.flush(0)


class Copier:
    """The copier in its own process, as Kafka's system test runs it. librdkafka can wait
    forever inside send_offsets_to_transaction when it dropped the group coordinator's broker
    while the broker restarted (librdkafka issues 5511 and 5456: it never sends the
    TxnOffsetCommit, whatever the timeout); a copier that commits nothing for STALL_S is killed
    and replaced, a crash the exactly-once check must survive too."""

    def __init__(self, bootstrap: str) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._bootstrap = bootstrap
        self.progress = self._context.Value("i", 0)
        self.done = self._context.Event()
        self.replaced = 0
        self._process = self._start()

    def _start(self) -> Any:
        process = self._context.Process(
            target=copy, args=(self._bootstrap, self.progress, self.done), daemon=True
        )
        process.start()
        return process

    def wait_done(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        last, last_change = self.progress.value, time.monotonic()
        while time.monotonic() < deadline:
            if self.done.wait(1.0):
                return True
            if self.progress.value != last:
                last, last_change = self.progress.value, time.monotonic()
            elif time.monotonic() - last_change > STALL_S:
                self._process.kill()
                self._process.join()
                self.replaced += 1
                self._process = self._start()
                last_change = time.monotonic()
        return False

    def stop(self) -> None:
        self._process.kill()
        self._process.join()


def read_output(broker: BrokerProcess) -> dict[int, list[str]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "copy-checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([OUTPUT])
    by_partition: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while (
            sum(map(len, by_partition.values())) < PARTITIONS * PER_PARTITION
            and time.monotonic() < deadline
        ):
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    by_partition[message.partition()].append((message.value() or b"").decode())
        # Anything more (a duplicate) would arrive now.
        for message in consumer.consume(num_messages=500, timeout=2.0):
            if message.error() is None:
                by_partition[message.partition()].append((message.value() or b"").decode())
    finally:
        consumer.close()
    return by_partition


def test_a_transactional_copy_survives_broker_kills_exactly_once(broker_factory) -> None:
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, INPUT, partitions=PARTITIONS)
    create_topic(broker.bootstrap, OUTPUT, partitions=PARTITIONS)
    seed(broker)
    copier = Copier(broker.bootstrap)
    try:
        for _ in range(KILLS):
            time.sleep(1.5)
            if copier.done.is_set():
                break
            broker.kill9()
            time.sleep(0.5)
            broker.restart()
        assert copier.wait_done(COPY_TIMEOUT_S), (
            f"copy unfinished: {copier.progress.value} transactions committed, "
            f"copier replaced {copier.replaced} times"
        )
    finally:
        copier.stop()
    output = read_output(broker)
    for partition in range(PARTITIONS):
        expected = [f"{partition}:{number}" for number in range(PER_PARTITION)]
        assert output[partition] == expected, describe_difference(output[partition], expected)


def describe_difference(seen: list[str], expected: list[str]) -> str:
    index = next(
        (i for i, (a, b) in enumerate(zip(seen, expected, strict=False)) if a != b),
        min(len(seen), len(expected)),
    )
    return f"{len(seen)} records, first difference at {index}: {seen[index : index + 3]}"
