"""Replication throttles (KIP-73) as Kafka's tools set them: `kafka-reassign-partitions
--throttle` caps the inter-broker rate on the brokers a move involves and names the moving
replicas in the topic's throttled-replica lists; the new replica then stays out of the ISR
while an unthrottled move beside it catches up. Resubmitting with a higher throttle lets it
finish, and `--verify` then removes every throttle."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import Cluster
from .kafka_cli import CONFIG_COMMAND, REASSIGN_PARTITIONS_COMMAND, tool_output

# Several fetches' worth (replica.fetch.max.bytes is 1 MiB), yet small.
RECORDS = 40
RECORD_BYTES = 100 * 1024
VERIFY_TIMEOUT_S = 90.0
TINY_THROTTLE = "1"
HIGH_THROTTLE = "1000000000"


def create_on(cluster: Cluster, topic: str, broker: int) -> None:
    """One partition, one replica on `broker`, with RECORDS records of RECORD_BYTES."""
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap()})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[broker]])])[topic].result(30)
    cluster.partition_leader(topic, 0)
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all"})
    failures: list[str] = []
    for index in range(RECORDS):
        producer.produce(
            topic,
            value=bytes([index]) * RECORD_BYTES,
            on_delivery=lambda error, _m: failures.append(str(error)) if error else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def plan(tmp_path: Path, topic: str, replicas: list[int]) -> str:
    path = tmp_path / f"{topic}.json"
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}
        )
    )
    return str(path)


def reassign(cluster: Cluster, *args: str) -> str:
    return tool_output(
        REASSIGN_PARTITIONS_COMMAND, "--bootstrap-server", cluster.live_bootstrap(), *args
    )


def dynamic_configs(cluster: Cluster, entity_type: str, name: str) -> dict[str, str]:
    """kafka-configs --describe: the entity's dynamic configs, name -> value."""
    output = tool_output(
        CONFIG_COMMAND,
        "--bootstrap-server",
        cluster.live_bootstrap(),
        "--describe",
        "--entity-type",
        entity_type,
        "--entity-name",
        name,
    )
    lines = (line.strip() for line in output.splitlines()[1:])
    pairs = (line.split(" ", 1)[0].split("=", 1) for line in lines if "=" in line)
    return {key: value for key, value in pairs}


def test_a_throttled_reassignment_stays_behind_until_the_throttle_is_raised(
    cluster: Cluster, tmp_path: Path
) -> None:
    leader, target = cluster.nodes[0].node_id, cluster.nodes[1].node_id
    throttled, unthrottled = "throttled-move", "unthrottled-move"
    create_on(cluster, throttled, leader)
    create_on(cluster, unthrottled, leader)
    throttled_plan = plan(tmp_path, throttled, [leader, target])

    executed = reassign(
        cluster,
        "--execute",
        "--reassignment-json-file",
        throttled_plan,
        "--throttle",
        TINY_THROTTLE,
    )
    assert f"The inter-broker throttle limit was set to {TINY_THROTTLE} B/s" in executed

    # The same move of the same data, unthrottled, from the same leader to the same broker.
    reassign(
        cluster,
        "--execute",
        "--additional",
        "--reassignment-json-file",
        plan(tmp_path, unthrottled, [leader, target]),
    )
    cluster.wait_full_isr(unthrottled, 0)
    assert target not in cluster.partition_state(throttled, 0).isr
    assert dynamic_configs(cluster, "topics", throttled) == {
        "leader.replication.throttled.replicas": f"0:{leader}",
        "follower.replication.throttled.replicas": f"0:{target}",
    }
    for broker in (leader, target):
        assert dynamic_configs(cluster, "brokers", str(broker)) == {
            "leader.replication.throttled.rate": TINY_THROTTLE,
            "follower.replication.throttled.rate": TINY_THROTTLE,
        }

    # Kafka's way to change the throttle of a running move: resubmit it with --additional.
    reassign(
        cluster,
        "--execute",
        "--additional",
        "--reassignment-json-file",
        throttled_plan,
        "--throttle",
        HIGH_THROTTLE,
    )
    deadline = time.monotonic() + VERIFY_TIMEOUT_S
    while f"Reassignment of partition {throttled}-0 is completed" not in (
        verified := reassign(cluster, "--verify", "--reassignment-json-file", throttled_plan)
    ):
        assert time.monotonic() < deadline, verified
        time.sleep(0.5)
    assert "Clearing broker-level throttles on brokers" in verified
    assert f"Clearing topic-level throttles on topic {throttled}" in verified
    # The controller answered --verify; the broker that describes the partition learns the
    # completed move from the metadata log a moment later, as in Kafka.
    cluster.wait_full_isr(throttled, 0)
    assert sorted(cluster.partition_state(throttled, 0).isr) == sorted([leader, target])
    assert dynamic_configs(cluster, "topics", throttled) == {}
    for broker in (leader, target):
        assert dynamic_configs(cluster, "brokers", str(broker)) == {}
