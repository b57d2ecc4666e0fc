"""Brokers and controllers on separate nodes (`process.roles=controller` / `broker`): a
controller-only node runs the metadata quorum, broker-only nodes observe it and serve clients.
The same cluster of Apache Kafka's nodes shows what a client and Kafka's tools should see."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from .cluster import Cluster
from .cluster_fixtures import CLUSTER_KINDS, make_cluster
from .kafka_cli import METADATA_QUORUM_COMMAND, tool_output

ROLES = ["controller", "broker", "broker"]
# Two brokers: every replicated topic, __consumer_offsets too, has two replicas.
TWO_BROKERS = {"offsets.topic.replication.factor": "2", "default.replication.factor": "2"}
RECORDS = 200
READ_TIMEOUT_S = 60.0


@pytest.fixture(scope="module", params=CLUSTER_KINDS)
def split_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    cluster = make_cluster(request.param, tmp_path_factory, TWO_BROKERS, ROLES)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode())
    assert producer.flush(30) == 0, "records left unacknowledged"


def consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def create_topic(cluster: Cluster, topic: str, partitions: int, replicas: int) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)
    for partition in range(partitions):
        cluster.partition_leader(topic, partition)


def test_a_controller_only_node_leads_and_broker_only_nodes_serve(split_cluster: Cluster) -> None:
    # Only the brokers register; the controller leads the quorum and sees them as observers.
    assert split_cluster.registered_node_ids() == {2, 3}
    assert split_cluster.active_controller() == 1
    replication = tool_output(
        METADATA_QUORUM_COMMAND,
        "--bootstrap-controller",
        split_cluster.bootstrap_controllers,
        "describe",
        "--replication",
    )
    statuses = {
        int(line.split()[0]): line.split()[-1]
        for line in replication.splitlines()[1:]
        if line.strip()
    }
    assert statuses == {1: "Leader", 2: "Observer", 3: "Observer"}, replication

    create_topic(split_cluster, "split", partitions=2, replicas=2)
    for partition in range(2):
        state = split_cluster.partition_state("split", partition)
        assert sorted(state.replicas) == [2, 3] and sorted(state.isr) == [2, 3]
    values = [str(n) for n in range(RECORDS)]
    produce(split_cluster.node(3).bootstrap, "split", values)
    read = consume(split_cluster.node(2).bootstrap, "split", "split-readers", RECORDS)
    assert sorted(read, key=int) == values


def test_a_broker_only_node_catches_up_with_the_metadata_after_a_restart(
    split_cluster: Cluster,
) -> None:
    split_cluster.kill9(3)
    # Created while broker 3 is down (fenced, so the replica goes to broker 2): it learns of
    # the topic from the controller afterwards.
    split_cluster.wait_fenced(3)
    create_topic(split_cluster, "while-away", partitions=1, replicas=1)
    produce(split_cluster.node(2).bootstrap, "while-away", ["kept"])
    split_cluster.restart(3)
    metadata = Consumer({"bootstrap.servers": split_cluster.node(3).bootstrap, "group.id": "probe"})
    try:
        topics = metadata.list_topics(timeout=30).topics
    finally:
        metadata.close()
    assert "while-away" in topics
    assert consume(split_cluster.node(3).bootstrap, "while-away", "late", 1) == ["kept"]
