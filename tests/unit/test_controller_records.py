"""Metadata records on the wire, their replay into images, and the metadata log."""

from __future__ import annotations

import uuid

import pytest
from krust.controller.image import ImageBuilder, MetadataImage, to_core_image
from krust.controller.records import (
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
    encode_record,
)

TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def test_topic_record_is_byte_exact() -> None:
    record = TopicRecord(name="foo", topic_id=TOPIC_ID)
    expected = bytes.fromhex(
        "01"  # frame version 1
        "02"  # api key 2: TopicRecord
        "00"  # record version 0
        "04666f6f"  # compact string "foo" (length + 1)
        "00000000000000000000000000000001"  # topic id
        "00"  # no tagged fields
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


def test_partition_record_is_byte_exact() -> None:
    record = PartitionRecord(
        partition_id=2,
        topic_id=TOPIC_ID,
        replicas=(1,),
        isr=(1,),
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
    )
    expected = bytes.fromhex(
        "010300"  # frame 1, api key 3, version 0
        "00000002"  # partition id
        "00000000000000000000000000000001"  # topic id
        "0200000001"  # replicas [1] (compact array: length + 1)
        "0200000001"  # isr [1]
        "01"  # removing replicas []
        "01"  # adding replicas []
        "00000001"  # leader
        "00000000"  # leader epoch
        "00000000"  # partition epoch
        "00"  # no tagged fields (leader recovery state 0 is the default)
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


@pytest.mark.parametrize(
    "record",
    [
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=uuid.uuid4(),
            broker_epoch=4,
            end_points=(
                BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),
            ),
            rack="r1",
            fenced=False,
        ),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 2), leader=2),
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="a", value=None),
        RemoveTopicRecord(topic_id=TOPIC_ID),
        FeatureLevelRecord(name="metadata.version", feature_level=14),
        ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=2000),
        NoOpRecord(),
    ],
)
def test_records_round_trip(record: object) -> None:
    assert decode_record(encode_record(record)) == record  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"", "truncated"),
        (bytes.fromhex("020200"), "frame version 2"),
        (bytes.fromhex("016300"), "api key 99"),
        (bytes.fromhex("010205"), "version 5"),
        (bytes.fromhex("01020004666f"), "malformed TopicRecord"),
        (encode_record(TopicRecord(name="foo", topic_id=TOPIC_ID)) + b"\x00", "trailing"),
    ],
)
def test_unreadable_records_are_refused(value: bytes, problem: str) -> None:
    with pytest.raises(MetadataRecordError, match=problem):
        decode_record(value)


def replay(*records: object) -> MetadataImage:
    builder = ImageBuilder(MetadataImage.empty("cluster", 1))
    return builder.replay_all(enumerate(records)).build()  # type: ignore[arg-type]


def topic_records(name: str = "t", topic_id: uuid.UUID = TOPIC_ID) -> list[object]:
    return [
        TopicRecord(name=name, topic_id=topic_id),
        PartitionRecord(
            partition_id=0,
            topic_id=topic_id,
            replicas=(1,),
            isr=(1,),
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
    ]


def test_partition_change_bumps_epochs_only_when_the_leader_changes() -> None:
    image = replay(
        *topic_records(),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 2)),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2),
    )
    partition = image.topics["t"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 1, 2)
    assert partition.isr == (1, 2)
    assert image.metadata_offset == 3


def test_configs_are_set_deleted_and_removed_with_their_topic() -> None:
    def config(name: str, value: str | None) -> ConfigRecord:
        return ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name=name, value=value)

    image = replay(*topic_records(), config("a", "1"), config("b", "2"), config("a", None))
    assert dict(image.topics["t"].configs) == {"b": "2"}
    recreated = uuid.uuid4()
    image = replay(
        *topic_records(),
        config("b", "2"),
        RemoveTopicRecord(topic_id=TOPIC_ID),
        *topic_records("t", recreated),
    )
    assert image.topics["t"].topic_id == recreated
    assert dict(image.topics["t"].configs) == {}


def test_contradicting_records_are_refused() -> None:
    with pytest.raises(MetadataRecordError, match="duplicate"):
        replay(*topic_records(), TopicRecord(name="t", topic_id=uuid.uuid4()))
    with pytest.raises(MetadataRecordError, match="unknown topic"):
        replay(topic_records()[1])
    with pytest.raises(MetadataRecordError, match="unknown"):
        replay(RemoveTopicRecord(topic_id=TOPIC_ID))


def test_core_image_has_the_documented_shape() -> None:
    image = replay(
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=uuid.uuid4(),
            broker_epoch=0,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=1, security_protocol=0),),
            rack=None,
            fenced=False,
        ),
        RegisterBrokerRecord(
            broker_id=2, incarnation_id=uuid.uuid4(), broker_epoch=1, end_points=(), fenced=True
        ),
        *topic_records("__consumer_offsets"),
    )
    assert to_core_image(image) == {
        "cluster_id": "cluster",
        "controller_id": 1,
        "metadata_offset": 3,
        "brokers": [
            {
                "node_id": 1,
                "host": "h",
                "port": 1,
                "rack": None,
                "listeners": {"PLAINTEXT": ("h", 1)},
            }
        ],
        "topics": [
            {
                "name": "__consumer_offsets",
                "topic_id": TOPIC_ID.bytes,
                "internal": True,
                "configs": {},
                "partitions": [
                    {
                        "partition": 0,
                        "leader": 1,
                        "leader_epoch": 0,
                        "partition_epoch": 0,
                        "replicas": [1],
                        "isr": [1],
                    }
                ],
            }
        ],
        "supported_features": {
            "metadata.version": (12, 14),
            "kraft.version": (0, 0),
            "group.version": (0, 1),
            "transaction.version": (0, 0),
            "eligible.leader.replicas.version": (0, 0),
            "share.version": (0, 0),
            "streams.version": (0, 0),
        },
        "finalized_features": {},
    }
