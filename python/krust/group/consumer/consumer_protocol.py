"""Kafka's embedded consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment).

A classic consumer sends its subscription as the metadata of its JoinGroup protocols and reads its
assignment from SyncGroup in these formats. The coordinator reads them when classic members join
a consumer group (KIP-848's bridge) and when a group changes type, and writes the assignment in the
version of the member's subscription, as Kafka's ConsumerProtocol does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from krust.coordinator.wire import Reader, RecordFormatError, Writer
from krust.group.cluster import TopicView
from krust.group.consumer.group_spec import Assignment

# The newest ConsumerProtocolSubscription / ConsumerProtocolAssignment version (v3, KIP-881).
HIGHEST_VERSION = 3

TopicPartitionsByName = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned_partitions: TopicPartitionsByName = ()
    rack_id: str | None = None


def subscription_version(metadata: bytes) -> int:
    """The version a member's subscription is written in (Kafka serializes its assignment in it,
    capped to the newest it knows)."""
    version = Reader(metadata).int16()
    if version < 0:
        raise RecordFormatError(f"consumer protocol version {version}")
    return min(version, HIGHEST_VERSION)


def parse_subscription(metadata: bytes) -> Subscription:
    """Read a ConsumerProtocolSubscription; RecordFormatError when it is malformed."""
    reader = Reader(metadata)
    version = reader.int16()
    if version < 0:
        raise RecordFormatError(f"consumer protocol version {version}")
    topics = tuple(reader.string() for _ in range(_count(reader)))
    reader.nullable_bytes()  # user data
    owned: TopicPartitionsByName = ()
    rack_id = None
    if version >= 1:
        owned = _read_topic_partitions(reader)
    if version >= 2:
        reader.int32()  # generation id
    if version >= 3:
        rack_id = reader.nullable_string()
    return Subscription(topics, owned, rack_id)


def parse_assignment(data: bytes) -> TopicPartitionsByName:
    """The partitions of a ConsumerProtocolAssignment (empty bytes: nothing assigned)."""
    if not data:
        return ()
    reader = Reader(data)
    if reader.int16() < 0:
        raise RecordFormatError("negative consumer protocol version")
    return _read_topic_partitions(reader)


def serialize_assignment(partitions: TopicPartitionsByName, version: int) -> bytes:
    """A ConsumerProtocolAssignment without user data (every version has the same fields)."""
    writer = Writer()
    writer.int16(version)
    writer.int32(len(partitions))
    for topic, numbers in partitions:
        writer.string(topic)
        writer.int32(len(numbers))
        for number in numbers:
            writer.int32(number)
    writer.int32(-1)
    return writer.getvalue()


def by_name(assignment: Assignment, topics_by_id: Mapping[uuid.UUID, str]) -> TopicPartitionsByName:
    """Topic ids to names, sorted; topics that no longer exist are left out."""
    named = [
        (topics_by_id[topic_id], tuple(sorted(partitions)))
        for topic_id, partitions in assignment.items()
        if topic_id in topics_by_id and partitions
    ]
    return tuple(sorted(named))


def by_id(
    partitions: TopicPartitionsByName, image_topics: Mapping[str, TopicView]
) -> dict[uuid.UUID, frozenset[int]]:
    """Topic names to ids; topics that do not exist are left out (Kafka's toTopicPartitionMap)."""
    assignment: dict[uuid.UUID, frozenset[int]] = {}
    for name, numbers in partitions:
        topic = image_topics.get(name)
        if topic is not None and numbers:
            assignment[topic.topic_id] = assignment.get(topic.topic_id, frozenset()) | frozenset(
                numbers
            )
    return assignment


def _read_topic_partitions(reader: Reader) -> TopicPartitionsByName:
    result = []
    for _ in range(_count(reader)):
        topic = reader.string()
        result.append((topic, tuple(reader.int32() for _ in range(_count(reader)))))
    return tuple(result)


def _count(reader: Reader) -> int:
    count = reader.int32()
    if count < 0:
        raise RecordFormatError("null array in the consumer protocol")
    return count
