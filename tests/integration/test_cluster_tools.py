"""Kafka's leader election and reassignment tools, and the admin clients behind them, against
one krust broker: what a single node can show of elections and reassignments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, TopicPartition
from kafka.protocol.admin import AlterPartitionReassignmentsRequest

from .broker_process import BrokerProcess
from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic
from .kafka_api import call_broker
from .kafka_cli import run_tool

LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_PARTITIONS_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def test_kafka_leader_election_finds_the_preferred_leaders_in_place(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "elected", partitions=2)
    everything = run_tool(
        LEADER_ELECTION_COMMAND,
        module_broker.bootstrap,
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert everything.returncode == 0, everything.stdout + everything.stderr
    one = run_tool(
        LEADER_ELECTION_COMMAND,
        module_broker.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "elected",
        "--partition",
        "1",
    )
    assert one.returncode == 0, one.stdout + one.stderr
    assert "Valid replica already elected for partitions elected-1" in one.stdout
    unknown = run_tool(
        LEADER_ELECTION_COMMAND,
        module_broker.bootstrap,
        "--election-type",
        "unclean",
        "--topic",
        "no-such-topic",
        "--partition",
        "0",
    )
    assert unknown.returncode != 0
    assert "Error completing leader election (UNCLEAN) for partition: no-such-topic-0" in (
        unknown.stdout
    )
    assert "UnknownTopicOrPartitionException" in unknown.stdout


def test_kafka_reassign_partitions_lists_and_refuses_unknown_brokers(
    module_broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(module_broker.bootstrap, "reassigned")
    listed = run_tool(REASSIGN_PARTITIONS_COMMAND, module_broker.bootstrap, "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "No partition reassignments found." in listed.stdout
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "reassigned", "partition": 0, "replicas": [1, 7]}],
            }
        )
    )
    refused = run_tool(
        REASSIGN_PARTITIONS_COMMAND,
        module_broker.bootstrap,
        "--execute",
        "--reassignment-json-file",
        str(plan),
    )
    assert refused.returncode != 0
    assert "Unknown broker id 7" in refused.stdout + refused.stderr


def test_the_controller_refuses_a_reassignment_to_an_unknown_broker(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "reassigned-on-the-wire")
    topic = AlterPartitionReassignmentsRequest.ReassignableTopic

    def reassign(replicas: list[int]) -> Any:
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=10_000,
            topics=[
                topic(
                    name="reassigned-on-the-wire",
                    partitions=[topic.ReassignablePartition(partition_index=0, replicas=replicas)],
                )
            ],
        )
        response = call_broker(module_broker.port, request, 0)
        return response.responses[0].partitions[0]

    unknown = reassign([1, 7])
    assert unknown.error_code == 39  # INVALID_REPLICA_ASSIGNMENT
    assert unknown.error_message == (
        "The manual partition assignment includes broker 7, but no such broker is registered."
    )
    assert reassign([1]).error_code == 0  # already there: nothing moves


def test_confluent_admin_elects_leaders(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "elected-by-confluent")
    admin = admin_client(module_broker.bootstrap)
    partition = TopicPartition("elected-by-confluent", 0)
    future = admin.elect_leaders(ElectionType.PREFERRED, [partition])
    results = future.result(ADMIN_TIMEOUT_S)
    (error,) = results.values()
    assert error is not None and error.name() == "ELECTION_NOT_NEEDED"
