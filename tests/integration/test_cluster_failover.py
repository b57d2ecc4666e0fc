"""Three combined nodes, RF=3, min.insync.replicas=2: nodes die (kill -9) or stall (SIGSTOP)
under an idempotent acks=all producer, and nothing acknowledged is lost, duplicated or
reordered; a consumer group keeps its committed offsets across the loss of its coordinator."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from .cluster import Cluster
from .no_loss import NumberedProducer, assert_no_loss, create_replicated_topic

PARTITIONS = 3
ROUNDS = 3
# Acknowledged records to wait for between faults: proof that writes went on.
PROGRESS = 100
GROUP_RECORDS = 300
CONSUME_TIMEOUT_S = 90.0
SHUTDOWN_TIMEOUT_S = 60.0


def restart_and_wait_full_isr(
    cluster: Cluster, node_id: int, topic: str, partitions: int = PARTITIONS
) -> None:
    """Bring a killed node back and wait until it is in every partition's ISR again, so the
    next fault starts from three in-sync replicas."""
    cluster.restart(node_id)
    for partition in range(partitions):
        cluster.wait_full_isr(topic, partition)


def test_leader_kill9_loop_loses_no_acknowledged_record(cluster: Cluster) -> None:
    topic = "no-loss-leader-kill"
    create_replicated_topic(cluster, topic, PARTITIONS)
    with NumberedProducer(cluster.bootstrap_servers, topic, PARTITIONS) as producer:
        producer.wait_acknowledged(PROGRESS)
        for _ in range(ROUNDS):
            leader = cluster.partition_leader(topic, 0)
            cluster.kill9(leader)
            cluster.wait_new_leader(topic, 0, leader)
            producer.wait_acknowledged(PROGRESS)
            restart_and_wait_full_isr(cluster, leader, topic)
        producer.wait_acknowledged(PROGRESS)
        assert_no_loss(cluster, producer)


def test_active_controller_kill9_loop_loses_nothing_and_metadata_works_again(
    cluster: Cluster,
) -> None:
    topic = "no-loss-controller-kill"
    create_replicated_topic(cluster, topic, PARTITIONS)
    with NumberedProducer(cluster.bootstrap_servers, topic, PARTITIONS) as producer:
        producer.wait_acknowledged(PROGRESS)
        for round_number in range(ROUNDS):
            controller = cluster.active_controller()
            cluster.kill9(controller)
            assert cluster.active_controller() != controller
            # The new active controller commits metadata: a topic can be created again.
            create_replicated_topic(cluster, f"{topic}-after-{round_number}", 1)
            producer.wait_acknowledged(PROGRESS)
            restart_and_wait_full_isr(cluster, controller, topic)
        producer.wait_acknowledged(PROGRESS)
        assert_no_loss(cluster, producer)


def test_sigterm_moves_leadership_away_while_the_broker_still_serves(cluster: Cluster) -> None:
    topic = "controlled-shutdown"
    create_replicated_topic(cluster, topic, 1)
    leader = cluster.partition_leader(topic, 0)
    cluster.terminate(leader)
    # Kafka's controlled shutdown: the leadership moves while the broker still answers
    # clients, so nobody finds a leader that no longer listens.
    moved_while_serving = False
    deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
    while cluster.running(leader) and time.monotonic() < deadline:
        if not cluster.accepts_connections(leader):
            break
        if cluster.partition_state(topic, 0).leader != leader:
            moved_while_serving = cluster.accepts_connections(leader)
            break
        time.sleep(0.05)
    assert moved_while_serving, "the broker stopped serving before its leadership moved"
    while cluster.running(leader) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not cluster.running(leader), "the broker did not stop after its controlled shutdown"
    assert cluster.partition_state(topic, 0).leader not in (leader, -1)
    restart_and_wait_full_isr(cluster, leader, topic, partitions=1)


def test_paused_follower_leaves_the_isr_and_rejoins_after_sigcont(cluster: Cluster) -> None:
    topic = "no-loss-paused-follower"
    create_replicated_topic(cluster, topic, 1)
    state = cluster.partition_state(topic, 0)
    controller = cluster.active_controller()
    # Not the active controller: this test is about a follower replica, not the quorum.
    follower = next(r for r in state.replicas if r not in (state.leader, controller))
    with NumberedProducer(cluster.bootstrap_servers, topic, 1) as producer:
        producer.wait_acknowledged(PROGRESS)
        cluster.pause(follower)
        cluster.wait_partition(
            topic, 0, lambda s: follower not in s.isr, f"paused node {follower} out of the ISR"
        )
        # Two in-sync replicas are min.insync.replicas: acks=all writes go on.
        producer.wait_acknowledged(PROGRESS)
        cluster.resume(follower)
        cluster.wait_partition(
            topic, 0, lambda s: sorted(s.isr) == sorted(s.replicas), f"{follower} back in the ISR"
        )
        producer.wait_acknowledged(PROGRESS)
        assert_no_loss(cluster, producer)


def consume(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"consumed {len(values)} of {count}"
        for message in consumer.consume(num_messages=count - len(values), timeout=0.5):
            assert message.error() is None, message.error()
            values.append(message.value() or b"")
    return values


def committed_offsets(cluster: Cluster, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
    request = [ConsumerGroupTopicPartitions(group)]
    answer = admin.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def group_coordinator(cluster: Cluster, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
    return int(admin.describe_consumer_groups([group])[group].result(30).coordinator.id)


def test_consumer_group_keeps_committed_offsets_across_loss_of_its_coordinator(
    cluster: Cluster,
) -> None:
    topic, group = "group-coordinator-loss", "group-coordinator-loss"
    create_replicated_topic(cluster, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for number in range(GROUP_RECORDS):
        producer.produce(topic, value=b"%d" % number, partition=number % PARTITIONS)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        first = consume(consumer, GROUP_RECORDS // 2)
        consumer.commit(asynchronous=False)
        before = committed_offsets(cluster, group)
        assert sum(before.values()) == len(first)

        coordinator = group_coordinator(cluster, group)
        cluster.kill9(coordinator)
        # Another broker leads the group's __consumer_offsets partition and serves the group.
        assert committed_offsets(cluster, group) == before
        assert group_coordinator(cluster, group) != coordinator

        rest = consume(consumer, GROUP_RECORDS - len(first))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(int(value) for value in first + rest) == list(range(GROUP_RECORDS))
    ends = {p: GROUP_RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert committed_offsets(cluster, group) == ends
