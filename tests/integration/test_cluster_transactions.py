"""Transactions on a three-node cluster (RF=3, min.insync.replicas=2), Apache Kafka and krust:
markers reach partition leaders on other brokers, and a transaction in flight when its
coordinator's broker is killed is completed or aborted by the new coordinator, never left
hanging (read_committed consumers get past it)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from krust.coordinator.partitioner import partition_for

from .cluster import Cluster
from .no_loss import create_replicated_topic

PARTITIONS = 3
TRANSACTION_STATE = "__transaction_state"
# Kafka's transaction.state.log.num.partitions default, which both kinds run with.
TRANSACTION_STATE_PARTITIONS = 50
RECORDS = 30
READ_S = 60.0


def transactional_producer(cluster: Cluster, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 15_000,
        }
    )
    producer.init_transactions(60)
    return producer


def read_committed(cluster: Cluster, topic: str, until: bytes) -> list[bytes]:
    """Every value a read_committed consumer delivers up to the plain `until` record on each
    partition (it gets there only once every transaction before it ended)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + READ_S
    try:
        while values.count(until) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.2):
                if message.error() is None:
                    values.append(message.value() or b"")
    finally:
        consumer.close()
    assert values.count(until) == PARTITIONS, f"stuck: read {len(values)} values"
    return [value for value in values if value != until]


def plain_records(cluster: Cluster, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all"})
    for partition in range(PARTITIONS):
        producer.produce(topic, value, partition=partition)
    assert producer.flush(60) == 0


def test_markers_reach_the_leaders_on_every_broker(cluster: Cluster) -> None:
    topic = f"txn-markers-{uuid.uuid4().hex[:6]}"
    create_replicated_topic(cluster, topic, PARTITIONS)
    leaders = {cluster.partition_leader(topic, p) for p in range(PARTITIONS)}
    producer = transactional_producer(cluster, f"markers-{topic}")
    for commit in (False, True):
        producer.begin_transaction()
        for number in range(RECORDS):
            producer.produce(topic, b"%d" % number, partition=number % PARTITIONS)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    plain_records(cluster, topic, b"end")
    assert sorted(int(v) for v in read_committed(cluster, topic, b"end")) == list(range(RECORDS))
    assert len(leaders) > 1, "the test needs partition leaders on several brokers"


def transaction_coordinator(cluster: Cluster, transactional_id: str) -> int:
    partition = partition_for(transactional_id, TRANSACTION_STATE_PARTITIONS)
    return cluster.partition_leader(TRANSACTION_STATE, partition)


def test_a_transaction_survives_the_loss_of_its_coordinator(cluster: Cluster) -> None:
    topic = f"txn-failover-{uuid.uuid4().hex[:6]}"
    create_replicated_topic(cluster, topic, PARTITIONS)
    transactional_id = f"failover-{topic}"
    producer = transactional_producer(cluster, transactional_id)
    coordinator = transaction_coordinator(cluster, transactional_id)
    producer.begin_transaction()
    for number in range(RECORDS):
        producer.produce(topic, b"%d" % number, partition=number % PARTITIONS)
    assert producer.flush(60) == 0
    cluster.kill9(coordinator)
    try:
        producer.commit_transaction(60)
        committed = True
    except KafkaException as error:
        # The new coordinator may have aborted it (its timeout passed): never half of it.
        committed = False
        if error.args[0].txn_requires_abort():
            producer.abort_transaction(60)
    assert transaction_coordinator(cluster, transactional_id) != coordinator
    plain_records(cluster, topic, b"end")
    seen = sorted(int(v) for v in read_committed(cluster, topic, b"end"))
    assert seen == (list(range(RECORDS)) if committed else []), (committed, seen)
