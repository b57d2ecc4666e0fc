"""examples/tenant_authorizer.py on a real broker: a principal (User:ANONYMOUS until
authentication exists) produces, consumes and joins groups within its tenant only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from .broker_process import BrokerProcess
from .clients.confluent import admin_client, create_topic
from .test_authorization import first_consumer_error, produce_error

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT_S = 15.0


@pytest.fixture
def tenant_broker(broker_factory) -> BrokerProcess:
    pythonpath = os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])
    return broker_factory(
        {"authorizer.class.name": "tenant_authorizer:TenantAuthorizer", "tenant.separator": "-"},
        env={"PYTHONPATH": pythonpath},
    )


def test_a_tenant_uses_its_own_topics_and_groups_only(tenant_broker: BrokerProcess) -> None:
    bootstrap = tenant_broker.bootstrap
    create_topic(bootstrap, "ANONYMOUS-orders")
    admin = admin_client(bootstrap)
    refused = admin.create_topics([NewTopic("acme-orders", 1, 1)])["acme-orders"]
    with pytest.raises(KafkaException) as error:
        refused.result(TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    assert produce_error(bootstrap, "ANONYMOUS-orders") is None
    denied = produce_error(bootstrap, "acme-orders")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python's idempotent producer needs IDEMPOTENT_WRITE, which tenants have.
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10_000)
    producer.send("ANONYMOUS-orders", b"value").get(TIMEOUT_S)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("acme-orders", b"value").get(TIMEOUT_S)
    producer.close()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "acme-readers"})
    consumer.subscribe(["ANONYMOUS-orders"])
    assert first_consumer_error(consumer).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    consumer.close()
