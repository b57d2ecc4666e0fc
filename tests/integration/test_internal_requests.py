"""Only the broker itself reaches its controller-only APIs and writes its internal topics: a
client's client id earns it nothing, and a forged group-offset record never becomes an offset."""

from __future__ import annotations

from krust.group.records import OffsetCommitKey, OffsetCommitValue, encode_record

from . import wire
from .broker_process import HOST
from .clients import CLIENTS_BY_NAME, consume_all
from .clients.confluent import create_topic
from .groups_support import GROUP_BROKER_OVERRIDES, RawGroupConnection, wait_for_coordinator
from .records import Record, now_ms

INVALID_TOPIC_EXCEPTION = 17
OFFSET_FETCH = 9
# One __consumer_offsets partition: every group's records go to partition 0.
OFFSETS_PARTITIONS = 1
CLOSE_TIMEOUT_S = 10.0
# The client id the core's own requests carry; sent by a client, it must not make it trusted.
INTERNAL_CLIENT_ID = "krust-internal"
confluent = CLIENTS_BY_NAME["confluent-kafka"]


def test_apiversions_does_not_advertise_allocate_producer_ids(broker) -> None:
    with wire.connect(HOST, broker.port) as sock:
        advertised = wire.api_versions(sock, 0, correlation_id=1)
    assert advertised.error_code == 0
    assert wire.API_ALLOCATE_PRODUCER_IDS not in advertised.ranges
    assert 19 in advertised.ranges  # CreateTopics, also served by Python, is listed


def test_allocate_producer_ids_from_a_client_closes_its_connection(broker) -> None:
    with wire.connect(HOST, broker.port) as sock:
        wire.send_allocate_producer_ids(sock, INTERNAL_CLIENT_ID, broker_id=1, correlation_id=1)
        assert wire.is_closed_by_peer(sock, CLOSE_TIMEOUT_S), "the client got an answer"
    # The broker's own requests still get producer ids: idempotent producers work.
    create_topic(broker.bootstrap, "idempotent")
    record = Record(b"key", b"idempotent value", (), now_ms())
    confluent.produce(broker.bootstrap, "idempotent", 0, [record], "none")
    consumed = consume_all(confluent, broker.bootstrap, "idempotent", 1)
    assert [(c.offset, c.record) for c in consumed] == [(0, record)]


def test_a_forged_offset_record_is_refused_and_not_loaded_after_a_restart(broker_factory) -> None:
    overrides = {**GROUP_BROKER_OVERRIDES, "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
    broker = broker_factory(overrides)
    group, topic = "victim-group", "victim-topic"
    create_topic(broker.bootstrap, topic)
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, group)  # creates __consumer_offsets
    finally:
        connection.close()
    key, value = encode_record(
        (
            OffsetCommitKey(group, topic, 0),
            OffsetCommitValue(offset=42, metadata="forged", commit_timestamp=now_ms()),
        )
    )
    partition = 0
    with wire.connect(HOST, broker.port) as sock:
        batch = wire.record_batch([(key, value)], now_ms())
        results = wire.produce_v3(sock, "__consumer_offsets", {partition: batch}, 1)
    assert results[partition].error_code == INVALID_TOPIC_EXCEPTION

    broker.stop()
    broker.restart()
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, group)
        fetched = connection.send(
            OFFSET_FETCH,
            1,
            {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
        )
    finally:
        connection.close()
    (fetched_topic,) = fetched.topics
    assert [p.committed_offset for p in fetched_topic.partitions] == [-1]
