"""The newest versions Kafka 4.x serves of the native apis, each sent and its answer checked."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from . import wire
from .broker_process import BrokerProcess
from .clients.confluent import create_topic, topic_id
from .kafka_api import call_broker, produce
from .records import now_ms

UNSUPPORTED_VERSION = 35
UNKNOWN_TOPIC_ID = 100
# ListOffsets target timestamps (KIP-405, KIP-1005, KIP-1023).
LATEST, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -4, -5, -6

ListTopic = ListOffsetsRequest.ListOffsetsTopic
FetchTopic = FetchRequest.FetchTopic


def produce_by_id(port: int, version: int, topic: uuid.UUID, values: list[bytes]) -> Any:
    batch = wire.record_batch([(None, value) for value in values], now_ms())
    return produce(port, version, topic, {0: batch})


def list_offset(port: int, version: int, topic: str, timestamp: int) -> Any:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListTopic(
                name=topic,
                partitions=[
                    ListTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
        timeout_ms=10_000,
    )
    response = call_broker(port, request, version)
    return response.topics[0].partitions[0]


def test_produce_v13_names_topics_by_id_and_fetch_v18_reads_them(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "by-id")
    known = topic_id(module_broker.bootstrap, "by-id")
    response = produce_by_id(module_broker.port, 13, known, [b"a", b"b"])
    written = response.responses[0]
    assert written.topic_id == known
    assert [(p.error_code, p.base_offset) for p in written.partition_responses] == [(0, 0)]

    unknown = produce_by_id(module_broker.port, 13, uuid.uuid4(), [b"lost"])
    assert unknown.responses[0].partition_responses[0].error_code == UNKNOWN_TOPIC_ID
    # v12 still names the topic.
    batch = wire.record_batch([(None, b"c")], now_ms())
    by_name = produce(module_broker.port, 12, "by-id", {0: batch}).responses[0]
    assert [(p.error_code, p.base_offset) for p in by_name.partition_responses] == [(0, 2)]

    for version in (17, 18):
        fetch = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic_id=known,
                    partitions=[
                        FetchTopic.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        fetched = call_broker(module_broker.port, fetch, version)
        partition = fetched.responses[0].partitions[0]
        assert fetched.responses[0].topic_id == known
        assert (partition.error_code, partition.high_watermark) == (0, 3)
        assert all(value in bytes(partition.records) for value in (b"a", b"b", b"c"))


def test_list_offsets_v11_answers_the_tiered_targets_as_kafka_without_remote_storage(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "tiers")
    known = topic_id(module_broker.bootstrap, "tiers")
    produce_by_id(module_broker.port, 13, known, [b"x", b"y", b"z"])
    port = module_broker.port

    latest = list_offset(port, 11, "tiers", LATEST)
    assert (latest.error_code, latest.offset) == (0, 3)
    local = list_offset(port, 11, "tiers", EARLIEST_LOCAL)
    assert (local.error_code, local.offset) == (0, 0)
    for version, target in ((9, LATEST_TIERED), (11, LATEST_TIERED), (11, EARLIEST_PENDING_UPLOAD)):
        tiered = list_offset(port, version, "tiers", target)
        assert (tiered.error_code, tiered.offset, tiered.leader_epoch) == (0, -1, -1)
    # Each target needs the version that introduced it, as Kafka's ReplicaManager checks.
    assert list_offset(port, 10, "tiers", EARLIEST_PENDING_UPLOAD).error_code == (
        UNSUPPORTED_VERSION
    )
    assert list_offset(port, 8, "tiers", LATEST_TIERED).error_code == UNSUPPORTED_VERSION


def test_metadata_v13_and_describe_cluster_v2(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "described", partitions=2)
    metadata = call_broker(
        module_broker.port,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="described")],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        13,
    )
    assert metadata.error_code == 0
    (topic,) = metadata.topics
    assert topic.topic_id == topic_id(module_broker.bootstrap, "described")
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]

    cluster = call_broker(
        module_broker.port,
        DescribeClusterRequest(
            include_cluster_authorized_operations=False,
            endpoint_type=1,
            include_fenced_brokers=True,
        ),
        2,
    )
    assert (cluster.error_code, cluster.endpoint_type) == (0, 1)
    assert [(b.port, b.is_fenced) for b in cluster.brokers] == [(module_broker.port, False)]
