"""Request-level checks Kafka makes on Produce: acks must be -1, 0 or 1, and an acks=all write
needs at least `min.insync.replicas` in-sync replicas; a refused write leaves nothing behind."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, Producer

from . import wire
from .broker_process import BrokerProcess
from .clients.confluent import create_topic, watermarks
from .kafka_api import produce
from .records import now_ms

NOT_ENOUGH_REPLICAS = 19
INVALID_REQUIRED_ACKS = 21


def send(bootstrap: str, topic: str, acks: str) -> KafkaError | None:
    """One record with `acks`, no retries (librdkafka retries NOT_ENOUGH_REPLICAS otherwise)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(topic, value=b"v", partition=0, on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(30) == 0
    return errors[0]


def batch() -> bytes:
    return wire.record_batch([(None, b"value")], now_ms())


def test_acks_all_below_min_insync_replicas_is_refused_and_nothing_is_written(
    module_broker: BrokerProcess,
) -> None:
    bootstrap = module_broker.bootstrap
    create_topic(bootstrap, "two-in-sync", config={"min.insync.replicas": "2"})
    error = send(bootstrap, "two-in-sync", "all")
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert watermarks(bootstrap, "two-in-sync", 0) == (0, 0)
    # acks=1 does not wait for the ISR.
    assert send(bootstrap, "two-in-sync", "1") is None
    assert watermarks(bootstrap, "two-in-sync", 0) == (0, 1)

    # Produce v8+ carries Kafka's message.
    response = produce(module_broker.port, 9, "two-in-sync", {0: batch()}, acks=-1)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2" in partition.error_message
    assert watermarks(bootstrap, "two-in-sync", 0) == (0, 1)


def test_the_broker_default_min_insync_replicas_applies_to_topics(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"min.insync.replicas": "2"})
    create_topic(broker.bootstrap, "defaults")
    error = send(broker.bootstrap, "defaults", "all")
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert watermarks(broker.bootstrap, "defaults", 0) == (0, 0)


def test_acks_other_than_minus_one_zero_one_are_invalid_on_every_partition(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "acks", partitions=2)
    for acks in (2, -2):
        response = produce(module_broker.port, 9, "acks", {0: batch(), 1: batch()}, acks=acks)
        errors = [p.error_code for p in response.responses[0].partition_responses]
        assert errors == [INVALID_REQUIRED_ACKS, INVALID_REQUIRED_ACKS]
    assert watermarks(module_broker.bootstrap, "acks", 0) == (0, 0)
    assert watermarks(module_broker.bootstrap, "acks", 1) == (0, 0)
