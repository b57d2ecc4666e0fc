"""A misconfigured node next to a running krust cluster: it says why it cannot join, and the
cluster keeps its quorum, its records and its produce path.

Each test starts ONE extra krust-broker (free ports, its own data dir) beside the shared
three-node cluster, with a config copied from node 2 and changed as an operator's mistake
would change it.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin.cluster import DescribeQuorumRequest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from krust.bridge.protocol import build_entity, encode_entity

from . import kafka_api, wire
from .cluster import HOST, KrustCluster, free_port, read_properties, write_properties
from .no_loss import create_replicated_topic, read_back

# These mistakes are krust's to report: only the krust cluster is used.
pytestmark = pytest.mark.parametrize("shared_cluster", ["krust"], indirect=True)
EXIT_TIMEOUT_S = 60.0
LOG_TIMEOUT_S = 60.0
BROKER_REGISTRATION, REGISTRATION_VERSION = 62, 4
DESCRIBE_QUORUM_VERSION = 2
# Another machine's address, as a copied config on a second machine would name: every
# 127.0.0.0/8 address is this machine's loopback, so the extra node can bind it.
OTHER_HOST = "127.0.0.2"


@dataclass(frozen=True)
class QuorumView:
    leader_id: int
    leader_epoch: int
    voters: frozenset[int]


def quorum_view(cluster: KrustCluster) -> QuorumView:
    """DescribeQuorum of __cluster_metadata-0, asked of the active controller (the quorum's
    leader answers it; the other nodes answer NOT_LEADER_OR_FOLLOWER)."""
    leader = cluster.node(cluster.active_controller())
    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        topics=[
            topic(
                topic_name="__cluster_metadata",
                partitions=[topic.PartitionData(partition_index=0)],
            )
        ]
    )
    response = kafka_api.call_broker(leader.port, request, DESCRIBE_QUORUM_VERSION)
    partition = response.topics[0].partitions[0]
    assert (response.error_code, partition.error_code) == (0, 0)
    voters = frozenset(voter.replica_id for voter in partition.current_voters)
    return QuorumView(partition.leader_id, partition.leader_epoch, voters)


def produce_numbered(bootstrap: str, topic: str, sequences: range) -> None:
    """Records `0:<sequence>` to partition 0, acks=all; fails unless every one is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for sequence in sequences:
        producer.produce(topic, f"0:{sequence}".encode(), partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and failures == []


@pytest.fixture
def cluster_with_records(cluster: KrustCluster) -> Iterator[tuple[KrustCluster, str]]:
    """The cluster with a fresh topic holding ten records; afterwards the quorum is unchanged,
    the ten records are all readable and produce still works."""
    topic = f"bad-config-{uuid.uuid4().hex[:8]}"
    create_replicated_topic(cluster, topic, 1)
    produce_numbered(cluster.live_bootstrap(), topic, range(10))
    before = quorum_view(cluster)
    yield cluster, topic
    assert quorum_view(cluster) == before
    produce_numbered(cluster.live_bootstrap(), topic, range(10, 15))
    assert read_back(cluster.live_bootstrap(), topic, 1) == {0: list(range(15))}


class ExtraNode:
    """One more krust-broker beside the cluster, on a changed copy of node 2's config."""

    def __init__(self, cluster: KrustCluster, home: Path, changes: Mapping[str, str]) -> None:
        home.mkdir()
        self.config_path = home / "server.properties"
        self.log_path = home / "node.log"
        properties = read_properties(cluster.node(2).config_path)
        write_properties(
            self.config_path, {**properties, "log.dirs": str(home / "data"), **changes}
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(cluster.executable), "--config", str(self.config_path)],
                cwd=home,
                env=cluster.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_line(self, *parts: str) -> str:
        """The first output line holding every one of `parts`."""
        deadline = time.monotonic() + LOG_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                if all(part in line for part in parts):
                    return line
            assert self.process.poll() is None, f"exited early:\n{self.output()[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"no line with {parts} in:\n{self.output()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(EXIT_TIMEOUT_S)


@pytest.fixture
def extra_nodes() -> Iterator[list[ExtraNode]]:
    """The extra nodes a test started, killed at teardown whatever happened."""
    started: list[ExtraNode] = []
    yield started
    for node in started:
        node.stop()


def test_a_copied_config_with_another_nodes_node_id_is_refused_at_start(
    cluster_with_records: tuple[KrustCluster, str], extra_nodes: list[ExtraNode], tmp_path: Path
) -> None:
    cluster, _ = cluster_with_records
    # node 2's own config on a second machine: same node.id, same voters, its own listeners.
    port, controller_port = free_port(), cluster.node(2).controller_port
    listeners = f"PLAINTEXT://{OTHER_HOST}:{port},CONTROLLER://{OTHER_HOST}:{controller_port}"
    changes = {"listeners": listeners, "advertised.listeners": f"PLAINTEXT://{OTHER_HOST}:{port}"}
    node = ExtraNode(cluster, tmp_path / "copy-of-node-2", changes)
    extra_nodes.append(node)

    assert node.process.wait(EXIT_TIMEOUT_S) == 2, node.output()
    line = node.wait_for_line("configuration error")
    assert "controller.quorum.voters" in line and "node.id 2" in line
    assert f"2@{cluster.node(2).controller_endpoint} is not this node" in line


def test_a_node_with_another_voter_list_says_so_and_leaves_the_quorum_alone(
    cluster_with_records: tuple[KrustCluster, str], extra_nodes: list[ExtraNode], tmp_path: Path
) -> None:
    cluster, _ = cluster_with_records
    ours = read_properties(cluster.node(1).config_path)["controller.quorum.voters"]
    port, controller_port = free_port(), free_port()
    theirs = f"{ours},4@{HOST}:{controller_port}"
    changes = {
        "node.id": "4",
        "controller.quorum.voters": theirs,
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
    }
    node = ExtraNode(cluster, tmp_path / "node-4", changes)
    extra_nodes.append(node)

    line = node.wait_for_line("ERROR", "INCONSISTENT_VOTER_SET")
    assert "controller.quorum.voters" in line
    assert f"is {ours} but this node's is {theirs}" in line
    # The node is still up, and the voters never saw its election requests (checked when
    # cluster_with_records compares the quorum before and after).
    assert node.process.poll() is None


def broker_registration(broker_id: int, cluster_id: str, port: int) -> bytes:
    """A BrokerRegistration v4 request frame of a new incarnation of `broker_id`."""
    request = build_entity(
        load_request_schema(BROKER_REGISTRATION, REGISTRATION_VERSION),
        {
            "broker_id": broker_id,
            "cluster_id": cluster_id,
            "incarnation_id": uuid.uuid4(),
            "listeners": [
                {"name": "PLAINTEXT", "host": HOST, "port": port, "security_protocol": 0}
            ],
            "features": [],
            "rack": None,
        },
    )
    header = wire.flexible_request_header(BROKER_REGISTRATION, REGISTRATION_VERSION, 1)
    return wire.frame(header + encode_entity(request))


def register(controller: tuple[str, int], frame: bytes) -> ErrorCode:
    with socket.create_connection(controller, timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(frame)
        body = wire.read_frame(sock)
    # Response header v1: the correlation id and an empty tagged-field section.
    assert int.from_bytes(body[:4], "big") == 1 and body[4] == 0
    read = entity_reader(load_response_schema(BROKER_REGISTRATION, REGISTRATION_VERSION))
    response, _ = read(body[5:], 0)
    return ErrorCode(response.error_code)


def test_registering_a_live_brokers_id_again_is_duplicate_broker_registration(
    cluster_with_records: tuple[KrustCluster, str],
) -> None:
    cluster, _ = cluster_with_records
    cluster_id = read_properties(cluster.node(1).config_path)["cluster.id"]
    active = cluster.node(cluster.active_controller())
    frame = broker_registration(2, cluster_id, free_port())

    assert register((HOST, active.controller_port), frame) is (
        ErrorCode.duplicate_broker_registration
    )
    # Broker 2 keeps its registration: it is still listed, unfenced.
    assert cluster.registered_node_ids() == {1, 2, 3}
