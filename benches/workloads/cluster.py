"""Three nodes, RF=3, acks=all, min.insync.replicas=2: produce throughput, end-to-end latency,
and failover time (a partition leader's kill -9 until the first acknowledgement of a record
sent after it), on a cluster from tests/integration/cluster.py (either kind)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from integration.cluster import Cluster

from workloads.latency import LatencyResult, measure_end_to_end
from workloads.produce import ProduceCase, ProduceResult, produce_with_librdkafka
from workloads.topics import create_topic

RF = 3
MIN_ISR = {"min.insync.replicas": "2"}
PRODUCE_CASE = ProduceCase(record_bytes=1024, acks="all", partitions=8, compression="none")
# The failover producer sends a record about every millisecond: the first acknowledgement after
# the kill comes at most this late after the new leader took over.
SEND_INTERVAL_S = 0.001
FAILOVER_TIMEOUT_S = 120.0


def produce_throughput(cluster: Cluster, topic: str, records: int) -> ProduceResult:
    create_topic(
        cluster.bootstrap_servers,
        topic,
        PRODUCE_CASE.partitions,
        configs=MIN_ISR,
        replication_factor=RF,
    )
    return produce_with_librdkafka(cluster.bootstrap_servers, topic, PRODUCE_CASE, records)


def end_to_end_latency(
    cluster: Cluster, topic: str, rate_per_s: int, seconds: float
) -> LatencyResult:
    create_topic(cluster.bootstrap_servers, topic, 1, configs=MIN_ISR, replication_factor=RF)
    return measure_end_to_end(cluster.bootstrap_servers, topic, rate_per_s, seconds)


@dataclass
class _PacedProducer:
    """An idempotent acks=all producer sending numbered records from a thread; remembers when
    each acknowledgement arrived."""

    bootstrap: str
    topic: str
    sent: int = 0
    acknowledged_at: dict[int, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        while not self._stopping.is_set():
            with self._lock:
                number = self.sent
                self.sent += 1
            producer.produce(self.topic, value=b"%d" % number, partition=0, on_delivery=self._ack)
            producer.poll(SEND_INTERVAL_S)
        producer.flush(FAILOVER_TIMEOUT_S)

    def _ack(self, error: KafkaError | None, message: Message) -> None:
        now = time.monotonic()
        with self._lock:
            if error is not None:
                self.failures.append(str(error))
            else:
                self.acknowledged_at[int(message.value() or b"-1")] = now

    def next_number(self) -> int:
        with self._lock:
            return self.sent

    def first_acknowledged_from(self, number: int) -> float | None:
        """When the first record numbered `number` or later was acknowledged."""
        with self._lock:
            times = [at for sent, at in self.acknowledged_at.items() if sent >= number]
        return min(times, default=None)

    def stop(self) -> None:
        self._stopping.set()


def _create_led_by(cluster: Cluster, topic: str, leader: int) -> None:
    """A one-partition RF=3 topic whose preferred (and first) leader is `leader`."""
    replicas = [leader, *(node.node_id for node in cluster.nodes if node.node_id != leader)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=MIN_ISR)
    admin.create_topics([new])[topic].result(60)
    cluster.wait_full_isr(topic, 0)


def failover_seconds(cluster: Cluster, topic: str) -> float:
    """Kill -9 the leader of a fresh topic under a paced producer; seconds from the kill to the
    first acknowledgement of a record sent after the leader was gone. The leader is not the
    active controller, so this times a partition's failover, not a controller election. The
    node is restarted and back in the ISR before this returns."""
    controller = cluster.active_controller()
    leader = next(node.node_id for node in cluster.nodes if node.node_id != controller)
    _create_led_by(cluster, topic, leader)
    producer = _PacedProducer(cluster.bootstrap_servers, topic)
    thread = threading.Thread(target=producer.run, name="failover-producer", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + FAILOVER_TIMEOUT_S
        while producer.first_acknowledged_from(0) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: no record acknowledged before the kill")
            time.sleep(0.01)
        killed_at = time.monotonic()
        cluster.kill9(leader)
        after_kill = producer.next_number()
        while (acknowledged := producer.first_acknowledged_from(after_kill)) is None:
            if time.monotonic() > killed_at + FAILOVER_TIMEOUT_S:
                raise RuntimeError(f"{topic}: nothing acknowledged after the leader's kill -9")
            time.sleep(0.001)
    finally:
        producer.stop()
        thread.join()
    if producer.failures:
        raise RuntimeError(f"{topic}: deliveries failed: {producer.failures[:3]}")
    cluster.restart(leader)
    cluster.wait_full_isr(topic, 0)
    return acknowledged - killed_at
