"""The transaction coordinator in a real broker, through the requests that need no producer ids
from the core: FindCoordinator for a transactional id (which creates __transaction_state),
DescribeTransactions, ListTransactions, EndTxn and AddPartitionsToTxn for an unknown id."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest

from .broker_process import BrokerProcess
from .clients.confluent import create_topic
from .kafka_api import call_broker

COORDINATOR_LOAD_IN_PROGRESS = 14
INVALID_PRODUCER_ID_MAPPING = 49
TRANSACTIONAL_ID_NOT_FOUND = 105


def until_loaded(send: Any) -> Any:
    """The answer once the coordinator's partition is loaded (clients retry error 14 too)."""
    deadline = time.monotonic() + 30
    while True:
        response = send()
        if getattr(response, "error_code", 0) != COORDINATOR_LOAD_IN_PROGRESS or (
            time.monotonic() > deadline
        ):
            return response
        time.sleep(0.05)


def test_transaction_apis_answer_for_unknown_transactional_ids(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "txn-target")
    found = call_broker(
        broker.port, FindCoordinatorRequest(key_type=1, coordinator_keys=["app-tx"]), 4
    )
    (coordinator,) = found.coordinators
    assert (coordinator.error_code, coordinator.port) == (0, broker.port)

    def end() -> Any:
        request = EndTxnRequest(
            transactional_id="app-tx", producer_id=5, producer_epoch=0, committed=True
        )
        return call_broker(broker.port, request, 3)

    assert until_loaded(end).error_code == INVALID_PRODUCER_ID_MAPPING
    described = call_broker(
        broker.port, DescribeTransactionsRequest(transactional_ids=["app-tx"]), 0
    )
    assert described.transaction_states[0].error_code == TRANSACTIONAL_ID_NOT_FOUND
    listed = call_broker(
        broker.port, ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0
    )
    assert (listed.error_code, list(listed.transaction_states)) == (0, [])
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="txn-target", partitions=[0])
    added = call_broker(
        broker.port,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="app-tx",
            v3_and_below_producer_id=5,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[topic],
        ),
        3,
    )
    (result,) = added.results_by_topic_v3_and_below
    assert result.results_by_partition[0].partition_error_code == INVALID_PRODUCER_ID_MAPPING
