"""Topic administration through confluent-kafka's AdminClient and the Java AdminClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewPartitions, NewTopic

from .broker_process import BrokerProcess, shared_broker
from .clients import CLIENTS_BY_NAME, consume_all
from .clients.confluent import (
    ADMIN_TIMEOUT_S,
    admin_client,
    create_topic,
    parse_topic_id,
    partition_count,
    topic_id,
    wait_for_partition_count,
    watermarks,
)
from .clients.java import JavaCommandError, run_java
from .records import Record

confluent = CLIENTS_BY_NAME["confluent-kafka"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module's tests, each on topics of its own names (the test that
    restarts its broker has one of its own)."""
    yield from shared_broker(tmp_path_factory.mktemp("topic-admin"))


def error_code_of(future) -> int:
    """The Kafka error code an admin future failed with."""
    with pytest.raises(KafkaException) as failure:
        future.result(timeout=ADMIN_TIMEOUT_S)
    return failure.value.args[0].code()


def produce_one(bootstrap: str, topic: str, value: bytes, partition: int = 0) -> KafkaError | None:
    """Produce one uncompressed record; the delivery error, or None once it is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    outcome: list[KafkaError | None] = []
    producer.produce(
        topic, value=value, partition=partition, on_delivery=lambda error, _: outcome.append(error)
    )
    producer.flush(30)
    assert len(outcome) == 1, "no delivery report within 30 s"
    return outcome[0]


def test_created_topic_has_its_partitions_and_configs(broker) -> None:
    create_topic(broker.bootstrap, "orders", partitions=3, config={"max.message.bytes": "2048"})

    assert partition_count(broker.bootstrap, "orders") == 3
    # The topic-level max.message.bytes, not the broker default of ~1 MiB, limits a batch.
    assert produce_one(broker.bootstrap, "orders", b"x" * 1000, partition=2) is None
    error = produce_one(broker.bootstrap, "orders", b"x" * 4000, partition=2)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_invalid_topic_config_is_rejected(broker) -> None:
    admin = admin_client(broker.bootstrap)
    bad = NewTopic("bad-config", 1, 1, config={"retention.ms": "forever"})

    futures = admin.create_topics([bad], operation_timeout=ADMIN_TIMEOUT_S)

    assert error_code_of(futures["bad-config"]) == KafkaError.INVALID_CONFIG
    assert partition_count(broker.bootstrap, "bad-config") is None


def test_a_config_the_core_cannot_use_is_refused_and_the_broker_restarts(broker_factory) -> None:
    broker = broker_factory()
    admin = admin_client(broker.bootstrap)
    # Kafka accepts segment.index.bytes >= 4; krust's indexes need room for one 12-byte entry.
    bad = NewTopic("tiny-index", 1, 1, config={"segment.index.bytes": "8"})

    futures = admin.create_topics([bad], operation_timeout=ADMIN_TIMEOUT_S)

    with pytest.raises(KafkaException) as failure:
        futures["tiny-index"].result(timeout=ADMIN_TIMEOUT_S)
    error = failure.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "segment.index.bytes" in error.str()
    broker.stop()
    broker.restart()
    assert partition_count(broker.bootstrap, "tiny-index") is None
    create_topic(broker.bootstrap, "after-restart", partitions=1)
    assert produce_one(broker.bootstrap, "after-restart", b"still serving") is None


def test_validate_only_creates_nothing(broker) -> None:
    admin = admin_client(broker.bootstrap)
    futures = admin.create_topics(
        [NewTopic("dry-run", 2, 1)], validate_only=True, operation_timeout=ADMIN_TIMEOUT_S
    )

    futures["dry-run"].result(timeout=ADMIN_TIMEOUT_S)

    assert partition_count(broker.bootstrap, "dry-run") is None


def test_creating_an_existing_topic_fails(broker) -> None:
    create_topic(broker.bootstrap, "twice", partitions=2)
    admin = admin_client(broker.bootstrap)

    futures = admin.create_topics([NewTopic("twice", 5, 1)], operation_timeout=ADMIN_TIMEOUT_S)

    assert error_code_of(futures["twice"]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert partition_count(broker.bootstrap, "twice") == 2


def test_invalid_topic_name_is_rejected(broker) -> None:
    admin = admin_client(broker.bootstrap)

    futures = admin.create_topics([NewTopic("no/slashes", 1, 1)], operation_timeout=10)

    assert error_code_of(futures["no/slashes"]) == KafkaError.TOPIC_EXCEPTION


def test_create_partitions_grows_but_never_shrinks(broker) -> None:
    create_topic(broker.bootstrap, "growing", partitions=1)
    admin = admin_client(broker.bootstrap)

    grown = admin.create_partitions([NewPartitions("growing", 4)])
    grown["growing"].result(timeout=ADMIN_TIMEOUT_S)

    assert wait_for_partition_count(broker.bootstrap, "growing", 4) == 4
    assert produce_one(broker.bootstrap, "growing", b"to the new partition", partition=3) is None
    shrunk = admin.create_partitions([NewPartitions("growing", 2)])
    assert error_code_of(shrunk["growing"]) == KafkaError.INVALID_PARTITIONS
    assert partition_count(broker.bootstrap, "growing") == 4


def test_deleted_topic_is_gone_and_recreated_empty(broker) -> None:
    create_topic(broker.bootstrap, "ephemeral")
    old_id = topic_id(broker.bootstrap, "ephemeral")
    old = [Record(f"old-{i}".encode(), b"old value", (), None) for i in range(5)]
    confluent.produce(broker.bootstrap, "ephemeral", 0, old, "none")
    admin = admin_client(broker.bootstrap)

    admin.delete_topics(["ephemeral"], operation_timeout=ADMIN_TIMEOUT_S)["ephemeral"].result(
        timeout=ADMIN_TIMEOUT_S
    )
    assert wait_for_partition_count(broker.bootstrap, "ephemeral", None) is None

    create_topic(broker.bootstrap, "ephemeral", partitions=1)
    assert topic_id(broker.bootstrap, "ephemeral") != old_id
    assert watermarks(broker.bootstrap, "ephemeral", 0) == (0, 0)
    new = [Record(b"new", b"new value", (("h", b"v"),), None)]
    confluent.produce(broker.bootstrap, "ephemeral", 0, new, "none")
    consumed = consume_all(confluent, broker.bootstrap, "ephemeral", 1)
    assert [(c.offset, c.record.key, c.record.value) for c in consumed] == [
        (0, b"new", b"new value")
    ]
    assert watermarks(broker.bootstrap, "ephemeral", 0) == (0, 1)


def test_deleting_an_unknown_topic_fails(broker) -> None:
    admin = admin_client(broker.bootstrap)

    futures = admin.delete_topics(["never-created"], operation_timeout=ADMIN_TIMEOUT_S)

    assert error_code_of(futures["never-created"]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_java_admin_client_creates_describes_and_deletes(broker) -> None:
    run_java("create-topic", broker.bootstrap, "java-admin", "3", "retention.ms=3600000")

    java_id, partitions = run_java("describe-topic", broker.bootstrap, "java-admin").split()
    assert partitions == "3"
    assert parse_topic_id(java_id) == topic_id(broker.bootstrap, "java-admin")

    with pytest.raises(JavaCommandError) as exists:
        run_java("create-topic", broker.bootstrap, "java-admin", "1")
    assert "TopicExistsException" in exists.value.message

    run_java("delete-topic", broker.bootstrap, "java-admin")
    assert wait_for_partition_count(broker.bootstrap, "java-admin", None) is None
    with pytest.raises(JavaCommandError) as unknown:
        run_java("describe-topic", broker.bootstrap, "java-admin")
    assert "UnknownTopicOrPartitionException" in unknown.value.message
