"""Consumer-group members of every Python client, each polling in its own thread, and the checks
the group tests share: who owns which partition, and which numbered records each member saw.

Run as `python -m integration.groups_support BOOTSTRAP GROUP TOPIC` (from tests/) it is a lone
confluent-kafka member that prints its assignment on every change, for tests that kill -9 it.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import (
    RangePartitionAssignor as AiokafkaRangeAssignor,
)
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.static.primitive import i16, i32
from krust.bridge.protocol import build_entity, encode_entity

from . import wire
from .broker_process import HOST

# Fast rebalances: no KIP-134 wait for more members, and session timeouts down to 1 s allowed.
GROUP_BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
# KIP-848 groups: short session and heartbeat (the bounds must allow them, Kafka checks them at
# start), so tests of member failures stay quick.
CONSUMER_GROUP_SESSION_TIMEOUT_MS = 6000
CONSUMER_GROUP_BROKER_OVERRIDES = {
    **GROUP_BROKER_OVERRIDES,
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": str(CONSUMER_GROUP_SESSION_TIMEOUT_MS),
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
POLL_TIMEOUT_S = 0.2
# Long enough for a rebalance with a member that is slow to rejoin (it rejoins on its next
# heartbeat), short enough to keep the suite quick.
REBALANCE_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 30.0
STABLE_FOR_S = 1.0

FIND_COORDINATOR = 10
OFFSET_FETCH = 9
COORDINATOR_LOAD_IN_PROGRESS = 14

RANGE = "range"
COOPERATIVE_STICKY = "cooperative-sticky"
LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
KAFKA_PYTHON_METADATA_MAX_AGE_MS = 1000


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


@dataclass(frozen=True)
class Delivered:
    """A numbered record as one member received it."""

    partition: int
    offset: int
    number: int


def produce_numbered(bootstrap: str, topic: str, numbers: Iterable[int], partitions: int) -> None:
    """Record n (value "n") goes to partition n % partitions; returns once all are acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for number in numbers:
        producer.produce(topic, value=str(number).encode(), partition=number % partitions)
    assert producer.flush(30) == 0, "records left undelivered"


class GroupMember:
    """One subscribe() consumer of `library`, polling in its own thread until close().

    Every client call happens on the member's thread (kafka-python and aiokafka consumers are
    not thread-safe); the test reads snapshots: `assignment`, `delivered`, `assign_calls`.
    All members auto-commit, and commit on close and before giving partitions up.
    """

    def __init__(
        self,
        library: str,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str = RANGE,
        instance_id: str | None = None,
        protocol: str = "classic",
    ) -> None:
        self.library = library
        # "consumer": KIP-848's group protocol (confluent-kafka only here; the assignor is the
        # broker's, `assignor` names it or is RANGE for the broker's default).
        self.protocol = protocol
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.assignor = assignor
        self.instance_id = instance_id
        self.assignment: frozenset[int] = frozenset()
        self.delivered: list[Delivered] = []
        self.assign_calls = 0  # confluent-kafka only: times on_assign ran
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"{library}-member", daemon=True)

    def __repr__(self) -> str:
        return f"<{self.library} member of {self.group}: {sorted(self.assignment)}>"

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        """Leave the group the way the library does on close (commit, then LeaveGroup); a
        second close does nothing."""
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.library} consumer did not close in time"
        self.check()

    def check(self) -> None:
        if self._failure is not None:
            raise AssertionError(f"{self.library} member failed: {self._failure!r}")

    def numbers(self) -> list[int]:
        return [d.number for d in self.delivered]

    def _run(self) -> None:
        try:
            if self.library == "confluent-kafka":
                self._run_confluent()
            elif self.library == "kafka-python":
                self._run_kafka_python()
            elif self.library == "aiokafka":
                asyncio.run(self._run_aiokafka())
            else:
                raise ValueError(f"unknown library {self.library}")
        except BaseException as error:
            self._failure = error

    def _take(self, partition: int, offset: int, value: bytes) -> None:
        self.delivered.append(Delivered(partition, offset, int(value)))

    def _run_confluent(self) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 500,
        }
        if self.protocol == "consumer":
            # The broker owns timeouts and assignment in KIP-848's protocol.
            config["group.protocol"] = "consumer"
            if self.assignor != RANGE:
                config["group.remote.assignor"] = self.assignor
        else:
            config["session.timeout.ms"] = SESSION_TIMEOUT_MS
            config["heartbeat.interval.ms"] = HEARTBEAT_INTERVAL_MS
            config["partition.assignment.strategy"] = self.assignor
        if self.instance_id is not None:
            config["group.instance.id"] = self.instance_id
        consumer = Consumer(config)

        def on_assign(_consumer: Consumer, _partitions: list) -> None:
            self.assign_calls += 1

        consumer.subscribe([self.topic], on_assign=on_assign)
        try:
            while not self._stop.is_set():
                for message in consumer.consume(num_messages=100, timeout=POLL_TIMEOUT_S):
                    if message.error() is None:
                        self._take(message.partition(), message.offset(), message.value())
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    def _run_kafka_python(self) -> None:
        strategy = CooperativeStickyAssignor if self.assignor == COOPERATIVE_STICKY else None
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=500,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=(strategy or RangePartitionAssignor,),
            # kafka-python 3.0.12 under load: a leader that assigned before its first
            # Metadata answer (its own documented race) rejoins only once its metadata
            # changes; refreshing every second lets it see the topic soon (default 5 min).
            metadata_max_age_ms=KAFKA_PYTHON_METADATA_MAX_AGE_MS,
        )
        try:
            # kafka-python 3.0.12 can send its first JoinGroup before its first Metadata
            # answer and, as the leader, assign nothing; knowing the topic first avoids that.
            if not consumer.partitions_for_topic(self.topic):
                raise AssertionError(f"the broker's Metadata has no partitions of {self.topic}")
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000))
                for messages in batches.values():
                    for message in messages:
                        self._take(message.partition, message.offset, message.value)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()

    async def _run_aiokafka(self) -> None:
        assert self.assignor == RANGE, "aiokafka has no cooperative assignor"
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=500,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=(AiokafkaRangeAssignor,),
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000))
                for messages in batches.values():
                    for message in messages:
                        self._take(message.partition, message.offset, message.value)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


def wait_for_exact_cover(
    members: Sequence[GroupMember],
    partitions: int,
    *,
    extra_owned: Callable[[], frozenset[int]] = frozenset,
    timeout_s: float = REBALANCE_TIMEOUT_S,
) -> None:
    """Wait until every partition has exactly one owner among `members` (plus the partitions
    `extra_owned` says someone outside them owns), every member owns some, and that lasted
    STABLE_FOR_S (a member that joined first owns everything until the others are in)."""

    def settled() -> bool:
        for member in members:
            member.check()
        if not all(member.assignment for member in members):
            return False
        owned = Counter(p for m in members for p in m.assignment) + Counter(extra_owned())
        return sorted(owned) == list(range(partitions)) and set(owned.values()) == {1}

    deadline = time.monotonic() + timeout_s
    while True:
        wait_until(settled, max(deadline - time.monotonic(), 0.1), f"an exact cover: {members}")
        time.sleep(STABLE_FOR_S)
        if settled():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"assignments kept changing for {timeout_s:.0f} s: {members}")


def wait_for_numbers(
    members: Sequence[GroupMember], expected: set[int], timeout_s: float = CONSUME_TIMEOUT_S
) -> None:
    wait_until(
        lambda: expected <= {n for m in members for n in m.numbers()},
        timeout_s,
        f"{len(expected)} numbered records to arrive",
    )


def assert_each_number_once(members: Sequence[GroupMember], expected: set[int]) -> None:
    """Together the members received every expected record exactly once, and nothing else."""
    seen = Counter(n for m in members for n in m.numbers())
    duplicated = sorted(n for n, times in seen.items() if times > 1)
    assert not duplicated, f"records delivered more than once: {duplicated[:20]}"
    assert set(seen) == expected, f"missing {sorted(expected - set(seen))[:20]}"


class RawGroupConnection:
    """A socket for requests a real client would never send (or not at that version), built
    from plain dicts (krust.bridge.protocol.build_entity) and parsed by kio, headers included."""

    def __init__(self, port: int) -> None:
        self._sock = wire.connect(HOST, port)
        self._responses = self._sock.makefile("rb")
        self._correlation_ids = itertools.count(1)

    def close(self) -> None:
        self._responses.close()
        self._sock.close()

    def send(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        request_type = load_request_schema(api_key, version)
        response_type = load_response_schema(api_key, version)
        correlation_id = next(self._correlation_ids)
        header = request_type.__header_schema__(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id=wire.CLIENT_ID,
        )
        request = build_entity(request_type, fields)
        self._sock.sendall(wire.frame(encode_entity(header) + encode_entity(request)))
        (size,) = struct.unpack(">i", self._responses.read(4))
        frame = self._responses.read(size)
        received, offset = entity_reader(response_type.__header_schema__)(frame, 0)
        assert received.correlation_id == correlation_id
        response, _ = entity_reader(response_type)(frame, offset)
        return response


def wait_for_coordinator(connection: RawGroupConnection, group: str) -> None:
    """FindCoordinator v2 until it names one (the first call creates __consumer_offsets), then
    OffsetFetch until the group's partition is loaded: as in Kafka, a coordinator answers
    COORDINATOR_LOAD_IN_PROGRESS while it loads, and clients retry it."""
    request = {"key": group, "key_type": 0}
    wait_until(
        lambda: connection.send(FIND_COORDINATOR, 2, request).error_code == 0,
        REBALANCE_TIMEOUT_S,
        "a group coordinator",
    )
    fetch_all = {"group_id": group, "topics": None}
    wait_until(
        lambda: (
            connection.send(OFFSET_FETCH, 2, fetch_all).error_code != COORDINATOR_LOAD_IN_PROGRESS
        ),
        REBALANCE_TIMEOUT_S,
        "the group coordinator's partition to load",
    )


def main(bootstrap: str, group: str, topic: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "partition.assignment.strategy": RANGE,
        }
    )
    consumer.subscribe([topic])
    printed = None
    while True:
        consumer.poll(POLL_TIMEOUT_S)
        current = sorted(tp.partition for tp in consumer.assignment())
        if current != printed:
            print("assigned", ",".join(map(str, current)), flush=True)
            printed = current


if __name__ == "__main__":
    main(*sys.argv[1:4])


class SteadyProducer:
    """Produces the next number every few milliseconds until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._partitions = partitions
        self._stop = threading.Event()
        self.produced: list[int] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for number in itertools.count():
            if self._stop.is_set():
                break
            self._producer.produce(
                self._topic, value=str(number).encode(), partition=number % self._partitions
            )
            self._producer.poll(0)
            self.produced.append(number)
            time.sleep(0.01)
        assert self._producer.flush(30) == 0

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)
