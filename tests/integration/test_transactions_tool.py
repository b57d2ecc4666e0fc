"""Kafka's own `kafka-transactions` tool against krust: list, describe, describe-producers,
find-hanging and abort of an open transaction (abort writes its marker straight to the
partition leader, the way an operator unblocks a stuck read_committed consumer)."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from .broker_process import BrokerProcess
from .clients.confluent import create_topic
from .kafka_cli import run_tool
from .test_transactions import broker, read_values, reader, sentinel, transactional_producer

__all__ = ["broker"]  # the module fixture, shared with test_transactions

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def transactions_tool(broker: BrokerProcess, *args: str) -> str:
    done = run_tool(TRANSACTIONS_COMMAND, broker.bootstrap, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def open_transaction(broker: BrokerProcess, topic: str, transactional_id: str) -> Producer:
    producer = transactional_producer(
        broker, transactional_id, **{"transaction.timeout.ms": 600_000}
    )
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(30) == 0
    return producer


def test_list_describe_and_describe_producers_show_an_open_transaction(
    broker: BrokerProcess,
) -> None:
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    transactional_id = f"tool-open-{topic}"
    producer = open_transaction(broker, topic, transactional_id)
    listed = transactions_tool(broker, "list")
    assert transactional_id in listed and "Ongoing" in listed, listed
    described = transactions_tool(broker, "describe", "--transactional-id", transactional_id)
    assert "Ongoing" in described and f"{topic}-0" in described, described
    producers = transactions_tool(
        broker, "describe-producers", "--topic", topic, "--partition", "0"
    )
    # ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp
    # CurrentTransactionStartOffset: the open transaction starts at offset 0.
    rows = [line.split() for line in producers.splitlines()[1:] if line.strip()]
    assert len(rows) == 1 and rows[0][-1] == "0", producers
    hanging = transactions_tool(broker, "find-hanging", "--broker-id", "1")
    assert transactional_id not in hanging and topic not in hanging, hanging
    producer.commit_transaction(30)
    described = transactions_tool(broker, "describe", "--transactional-id", transactional_id)
    assert "CompleteCommit" in described, described


def test_abort_unblocks_read_committed_consumers_of_a_stuck_transaction(
    broker: BrokerProcess,
) -> None:
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    # Kept alive, never ended: as a producer that hangs would leave it.
    stuck = open_transaction(broker, topic, f"tool-stuck-{topic}")
    end = sentinel(broker, topic, 1)
    blocked = reader(broker, topic, 1, True)
    try:
        # The open transaction holds the last stable offset at its first record.
        assert read_values(blocked) == []
    finally:
        blocked.close()
    transactions_tool(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    unblocked = reader(broker, topic, 1, True)
    try:
        assert read_values(unblocked, until=end) == [end]
    finally:
        unblocked.close()
    assert stuck is not None
