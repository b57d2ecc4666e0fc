"""Kafka's own command-line tools against a three-node cluster: kafka-topics,
kafka-metadata-quorum, kafka-reassign-partitions and kafka-leader-election see an ordinary
Kafka cluster."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from .cluster import Cluster
from .kafka_cli import (
    LEADER_ELECTION_COMMAND,
    METADATA_QUORUM_COMMAND,
    REASSIGN_PARTITIONS_COMMAND,
    TOPIC_COMMAND,
    run_tool,
    tool_output,
)
from .no_loss import create_replicated_topic

VERIFY_TIMEOUT_S = 60.0
PARTITION_LINE = re.compile(
    r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)"
)


def ids(listed: str) -> list[int]:
    return [int(part) for part in listed.split(",") if part]


def describe(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """kafka-topics --describe: partition -> (leader, replicas, ISR)."""
    output = tool_output(
        TOPIC_COMMAND,
        "--bootstrap-server",
        cluster.live_bootstrap(),
        "--describe",
        "--topic",
        topic,
    )
    return {
        int(partition): (int(leader), ids(replicas), ids(isr))
        for partition, leader, replicas, isr in PARTITION_LINE.findall(output)
    }


def test_kafka_topics_creates_rf3_and_describes_leaders_replicas_and_isr(cluster: Cluster) -> None:
    topic = "cli-topics-rf3"
    created = run_tool(
        TOPIC_COMMAND,
        cluster.bootstrap_servers,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
    assert created.returncode == 0, created.stdout + created.stderr
    for partition in range(3):
        cluster.wait_full_isr(topic, partition)
    described = describe(cluster, topic)
    node_ids = sorted(node.node_id for node in cluster.nodes)
    assert sorted(described) == [0, 1, 2]
    for leader, replicas, isr in described.values():
        assert sorted(replicas) == node_ids
        assert sorted(isr) == node_ids
        assert leader == replicas[0]
    # Placement staggers the leaders over the nodes.
    assert sorted(leader for leader, _, _ in described.values()) == node_ids


def test_kafka_metadata_quorum_describes_status_and_replication(cluster: Cluster) -> None:
    leader = cluster.active_controller()
    status = tool_output(
        METADATA_QUORUM_COMMAND,
        "--bootstrap-controller",
        cluster.bootstrap_controllers,
        "describe",
        "--status",
    )
    assert re.search(rf"^LeaderId:\s+{leader}$", status, re.MULTILINE), status
    voters = re.search(r"^CurrentVoters:\s+(.*)$", status, re.MULTILINE)
    assert voters is not None, status
    voter_ids = sorted(voter["id"] for voter in json.loads(voters[1]))
    assert voter_ids == [node.node_id for node in cluster.nodes]

    replication = tool_output(
        METADATA_QUORUM_COMMAND,
        "--bootstrap-controller",
        cluster.bootstrap_controllers,
        "describe",
        "--replication",
    )
    statuses = dict(
        re.findall(r"^(\d+)\s.*\s(Leader|Follower|Observer)\s*$", replication, re.MULTILINE)
    )
    assert statuses == {
        str(node.node_id): "Leader" if node.node_id == leader else "Follower"
        for node in cluster.nodes
    }


def reassign(cluster: Cluster, *args: str) -> str:
    return tool_output(
        REASSIGN_PARTITIONS_COMMAND, "--bootstrap-server", cluster.live_bootstrap(), *args
    )


def test_kafka_reassign_partitions_generates_executes_and_verifies(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic = "cli-reassign"
    create_replicated_topic(cluster, topic, 1)
    node_ids = [node.node_id for node in cluster.nodes]
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = reassign(
        cluster,
        "--generate",
        "--topics-to-move-json-file",
        str(topics_file),
        "--broker-list",
        ",".join(map(str, node_ids)),
    )
    proposed = json.loads(generated.split("Proposed partition reassignment configuration")[1])
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == [(topic, 0)]
    assert sorted(proposed["partitions"][0]["replicas"]) == node_ids

    # Rotate the replica list: the first replica, the preferred leader, changes.
    current = cluster.partition_state(topic, 0).replicas
    wanted = [*current[1:], current[0]]
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": wanted}]}
        )
    )
    executed = reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert f"Successfully started partition reassignment for {topic}-0" in executed
    deadline = time.monotonic() + VERIFY_TIMEOUT_S
    while f"Reassignment of partition {topic}-0 is completed" not in (
        verified := reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
    ):
        assert time.monotonic() < deadline, verified
        time.sleep(0.5)
    assert describe(cluster, topic)[0][1] == wanted


def test_kafka_leader_election_moves_leadership_back_to_the_preferred_replica(
    cluster: Cluster,
) -> None:
    topic = "cli-preferred-election"
    create_replicated_topic(cluster, topic, 1)
    preferred = cluster.partition_state(topic, 0).replicas[0]
    cluster.kill9(preferred)
    cluster.wait_new_leader(topic, 0, preferred)
    cluster.restart(preferred)
    cluster.wait_full_isr(topic, 0)
    assert describe(cluster, topic)[0][0] != preferred

    # The restarted node can lead once it is in the ISR and unfenced; on a loaded machine it
    # may miss a heartbeat (broker.session.timeout.ms is 3 s here) and be fenced for a moment,
    # when Kafka too answers PREFERRED_LEADER_NOT_AVAILABLE: then wait for the ISR and ask again.
    deadline = time.monotonic() + VERIFY_TIMEOUT_S
    while True:
        elected = run_tool(
            LEADER_ELECTION_COMMAND,
            cluster.live_bootstrap(),
            "--election-type",
            "preferred",
            "--topic",
            topic,
            "--partition",
            "0",
        )
        unavailable = "PreferredLeaderNotAvailableException" in elected.stdout + elected.stderr
        if elected.returncode == 0 or not unavailable or time.monotonic() > deadline:
            break
        time.sleep(0.5)
        cluster.wait_full_isr(topic, 0)
    assert elected.returncode == 0, elected.stdout + elected.stderr
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in (
        elected.stdout
    )
    assert describe(cluster, topic)[0][0] == preferred
