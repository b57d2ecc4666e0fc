"""The records of KIP-848 consumer groups in `__consumer_offsets`, byte-compatible with Kafka 4.3.

Record types 3 to 8 and 16 of Kafka's CoordinatorRecordType (the schemas of its
`group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`). A key is the int16
record type, then the key's strings in the non-flexible form (Kafka 3.x called the type the key's
version: the bytes are the same). A value is an int16 version, then its fields in the flexible form
(compact lengths, a tagged-field block closing every struct). Every value has had version 0 only
since Kafka 3.8 (the early-access records of 3.7 changed incompatibly and Kafka does not read them);
fields added later are tagged, written only when they differ from their default as Kafka does, and
unknown tags are skipped. Kafka 4.1 stopped writing ConsumerGroupPartitionMetadata (KIP-1101
replaced it by the group's metadata hash), but older logs still hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TypeVar, assert_never, cast
from uuid import UUID

from krust.coordinator.wire import Reader, RecordFormatError, Writer

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
VALUE_VERSION = 0

_NULL_STRUCT = -1
_PRESENT_STRUCT = 1

__all__ = [
    "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT",
    "CONSUMER_GROUP_MEMBER_METADATA",
    "CONSUMER_GROUP_METADATA",
    "CONSUMER_GROUP_PARTITION_METADATA",
    "CONSUMER_GROUP_REGULAR_EXPRESSION",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA",
    "VALUE_VERSION",
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupKey",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRecord",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupValue",
    "PartitionMetadata",
    "TopicMetadata",
    "TopicPartitions",
    "decode_consumer_group_record",
    "encode_consumer_group_key",
    "encode_consumer_group_value",
    "read_consumer_group_key",
]


@dataclass(frozen=True)
class TopicPartitions:
    topic_id: UUID
    partitions: tuple[int, ...]
    # The member epoch at which each partition was assigned, aligned with `partitions` (KIP-1251,
    # Kafka 4.3): only a current member assignment carries it.
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol (JoinGroup) sent."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: UUID
    topic_name: str
    num_partitions: int
    # Deprecated by Kafka 4.0, which writes an empty tuple.
    partition_metadata: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int
    # The hash of the subscribed topics' metadata (KIP-1101, Kafka 4.1).
    metadata_hash: int = 0


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # When the assignment was computed, in ms (KIP-1263, Kafka 4.3).
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
ConsumerGroupRecord = (
    tuple[ConsumerGroupMetadataKey, ConsumerGroupMetadataValue | None]
    | tuple[ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue | None]
    | tuple[ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue | None]
    | tuple[
        ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue | None
    ]
    | tuple[ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue | None]
    | tuple[
        ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue | None
    ]
    | tuple[ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue | None]
)
"""A key with its value; a None value is a tombstone."""

T = TypeVar("T")


# -- primitives --------------------------------------------------------------------------------


def _write_array(writer: Writer, items: Sequence[T], write: Callable[[Writer, T], None]) -> None:
    writer.array_length(len(items))
    for item in items:
        write(writer, item)


def _read_array(reader: Reader, read: Callable[[Reader], T]) -> tuple[T, ...]:
    return tuple(read(reader) for _ in range(reader.array_length()))


def _tagged_field(write: Callable[[Writer], None]) -> bytes:
    """A tagged field's data: tagged fields exist only in flexible versions, so compact."""
    writer = Writer(compact=True)
    write(writer)
    return writer.getvalue()


def _read_tagged(tags: dict[int, bytes], tag: int, read: Callable[[Reader], T], default: T) -> T:
    return read(Reader(tags[tag], compact=True)) if tag in tags else default


def _write_nullable_int32s(writer: Writer, values: tuple[int, ...] | None) -> None:
    writer.array_length(None if values is None else len(values))
    for value in values or ():
        writer.int32(value)


def _read_nullable_int32s(reader: Reader) -> tuple[int, ...] | None:
    length = reader.nullable_array_length()
    return None if length is None else tuple(reader.int32() for _ in range(length))


# -- keys --------------------------------------------------------------------------------------

_KEY_CLASSES: dict[int, type[ConsumerGroupKey]] = {
    CONSUMER_GROUP_METADATA: ConsumerGroupMetadataKey,
    CONSUMER_GROUP_PARTITION_METADATA: ConsumerGroupPartitionMetadataKey,
    CONSUMER_GROUP_MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    CONSUMER_GROUP_REGULAR_EXPRESSION: ConsumerGroupRegularExpressionKey,
}
_RECORD_TYPES = {key_class: record_type for record_type, key_class in _KEY_CLASSES.items()}


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    writer = Writer()
    writer.int16(_RECORD_TYPES[type(key)])
    # Every key field is a string, written in field order.
    for field in fields(key):
        writer.string(getattr(key, field.name))
    return writer.getvalue()


def read_consumer_group_key(record_type: int, reader: Reader) -> ConsumerGroupKey | None:
    """The key after its record type, or None when the type is not a consumer group's."""
    key_class = _KEY_CLASSES.get(record_type)
    if key_class is None:
        return None
    return key_class(*(reader.string() for _ in fields(key_class)))


# -- values ------------------------------------------------------------------------------------


def _write_topic_partitions(writer: Writer, topic: TopicPartitions) -> None:
    writer.uuid(topic.topic_id)
    _write_array(writer, topic.partitions, Writer.int32)
    epochs = topic.assignment_epochs
    if epochs is None:
        writer.empty_tagged_fields()
    else:
        writer.tagged_fields({0: _tagged_field(lambda w: _write_nullable_int32s(w, epochs))})


def _read_topic_partitions(reader: Reader) -> TopicPartitions:
    topic_id = reader.uuid()
    partitions = _read_array(reader, Reader.int32)
    epochs = _read_tagged(reader.tagged_fields(), 0, _read_nullable_int32s, None)
    return TopicPartitions(topic_id, partitions, epochs)


def _write_target_partitions(writer: Writer, topic: TopicPartitions) -> None:
    if topic.assignment_epochs is not None:
        raise ValueError("a target assignment has no assignment epochs (KIP-1251)")
    _write_topic_partitions(writer, topic)


def _read_target_partitions(reader: Reader) -> TopicPartitions:
    """A target assignment's TopicPartition: Kafka's schema has no tag 0 there, so it is skipped."""
    topic_id = reader.uuid()
    partitions = _read_array(reader, Reader.int32)
    reader.skip_tagged_fields()
    return TopicPartitions(topic_id, partitions)


def _write_classic_protocol(writer: Writer, protocol: ClassicProtocol) -> None:
    writer.string(protocol.name)
    writer.bytes_field(protocol.metadata)
    writer.empty_tagged_fields()


def _read_classic_protocol(reader: Reader) -> ClassicProtocol:
    protocol = ClassicProtocol(reader.string(), reader.bytes_field())
    reader.skip_tagged_fields()
    return protocol


def _write_classic_member(writer: Writer, classic: ClassicMemberMetadata) -> None:
    writer.int8(_PRESENT_STRUCT)
    writer.int32(classic.session_timeout_ms)
    _write_array(writer, classic.supported_protocols, _write_classic_protocol)
    writer.empty_tagged_fields()


def _read_classic_member(reader: Reader) -> ClassicMemberMetadata | None:
    """A nullable struct: an int8 says whether it is present (1) or null (-1)."""
    if reader.int8() == _NULL_STRUCT:
        return None
    session_timeout_ms = reader.int32()
    protocols = _read_array(reader, _read_classic_protocol)
    reader.skip_tagged_fields()
    return ClassicMemberMetadata(session_timeout_ms, protocols)


def _write_member_metadata(writer: Writer, value: ConsumerGroupMemberMetadataValue) -> None:
    writer.nullable_string(value.instance_id)
    writer.nullable_string(value.rack_id)
    writer.string(value.client_id)
    writer.string(value.client_host)
    _write_array(writer, value.subscribed_topic_names, Writer.string)
    writer.nullable_string(value.subscribed_topic_regex)
    writer.int32(value.rebalance_timeout_ms)
    writer.nullable_string(value.server_assignor)
    classic = value.classic_member_metadata
    if classic is None:
        writer.empty_tagged_fields()
    else:
        writer.tagged_fields({0: _tagged_field(lambda w: _write_classic_member(w, classic))})


def _read_member_metadata(reader: Reader) -> ConsumerGroupMemberMetadataValue:
    instance_id = reader.nullable_string()
    rack_id = reader.nullable_string()
    client_id = reader.string()
    client_host = reader.string()
    subscribed_topic_names = _read_array(reader, Reader.string)
    subscribed_topic_regex = reader.nullable_string()
    rebalance_timeout_ms = reader.int32()
    server_assignor = reader.nullable_string()
    classic = _read_tagged(reader.tagged_fields(), 0, _read_classic_member, None)
    return ConsumerGroupMemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    )


def _write_partition_metadata(writer: Writer, partition: PartitionMetadata) -> None:
    writer.int32(partition.partition)
    _write_array(writer, partition.racks, Writer.string)
    writer.empty_tagged_fields()


def _read_partition_metadata(reader: Reader) -> PartitionMetadata:
    partition = PartitionMetadata(reader.int32(), _read_array(reader, Reader.string))
    reader.skip_tagged_fields()
    return partition


def _write_topic_metadata(writer: Writer, topic: TopicMetadata) -> None:
    writer.uuid(topic.topic_id)
    writer.string(topic.topic_name)
    writer.int32(topic.num_partitions)
    _write_array(writer, topic.partition_metadata, _write_partition_metadata)
    writer.empty_tagged_fields()


def _read_topic_metadata(reader: Reader) -> TopicMetadata:
    topic_id = reader.uuid()
    topic_name = reader.string()
    num_partitions = reader.int32()
    partition_metadata = _read_array(reader, _read_partition_metadata)
    reader.skip_tagged_fields()
    return TopicMetadata(topic_id, topic_name, num_partitions, partition_metadata)


def _write_value_fields(writer: Writer, value: ConsumerGroupValue) -> None:
    match value:
        case ConsumerGroupMetadataValue():
            writer.int32(value.epoch)
            metadata_hash = value.metadata_hash
            writer.tagged_fields(
                {0: _tagged_field(lambda w: w.int64(metadata_hash))} if metadata_hash else {}
            )
        case ConsumerGroupPartitionMetadataValue():
            _write_array(writer, value.topics, _write_topic_metadata)
            writer.empty_tagged_fields()
        case ConsumerGroupMemberMetadataValue():
            _write_member_metadata(writer, value)
        case ConsumerGroupTargetAssignmentMetadataValue():
            writer.int32(value.assignment_epoch)
            timestamp = value.assignment_timestamp
            writer.tagged_fields(
                {0: _tagged_field(lambda w: w.int64(timestamp))} if timestamp else {}
            )
        case ConsumerGroupTargetAssignmentMemberValue():
            _write_array(writer, value.topic_partitions, _write_target_partitions)
            writer.empty_tagged_fields()
        case ConsumerGroupCurrentMemberAssignmentValue():
            writer.int32(value.member_epoch)
            writer.int32(value.previous_member_epoch)
            writer.int8(value.state)
            _write_array(writer, value.assigned_partitions, _write_topic_partitions)
            _write_array(writer, value.partitions_pending_revocation, _write_topic_partitions)
            writer.empty_tagged_fields()
        case ConsumerGroupRegularExpressionValue():
            _write_array(writer, value.topics, Writer.string)
            writer.int64(value.version)
            writer.int64(value.timestamp)
            writer.empty_tagged_fields()
        case _:
            assert_never(value)


def _read_group_metadata(reader: Reader) -> ConsumerGroupMetadataValue:
    epoch = reader.int32()
    return ConsumerGroupMetadataValue(
        epoch, _read_tagged(reader.tagged_fields(), 0, Reader.int64, 0)
    )


def _read_partition_metadata_value(reader: Reader) -> ConsumerGroupPartitionMetadataValue:
    topics = _read_array(reader, _read_topic_metadata)
    reader.skip_tagged_fields()
    return ConsumerGroupPartitionMetadataValue(topics)


def _read_target_assignment_metadata(reader: Reader) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = reader.int32()
    timestamp = _read_tagged(reader.tagged_fields(), 0, Reader.int64, 0)
    return ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp)


def _read_target_assignment_member(reader: Reader) -> ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions = _read_array(reader, _read_target_partitions)
    reader.skip_tagged_fields()
    return ConsumerGroupTargetAssignmentMemberValue(topic_partitions)


def _read_current_member_assignment(reader: Reader) -> ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch = reader.int32()
    previous_member_epoch = reader.int32()
    state = reader.int8()
    assigned = _read_array(reader, _read_topic_partitions)
    pending_revocation = _read_array(reader, _read_topic_partitions)
    reader.skip_tagged_fields()
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch, previous_member_epoch, state, assigned, pending_revocation
    )


def _read_regular_expression(reader: Reader) -> ConsumerGroupRegularExpressionValue:
    topics = _read_array(reader, Reader.string)
    value = ConsumerGroupRegularExpressionValue(topics, reader.int64(), reader.int64())
    reader.skip_tagged_fields()
    return value


_VALUE_READERS: dict[type[ConsumerGroupKey], Callable[[Reader], ConsumerGroupValue]] = {
    ConsumerGroupMetadataKey: _read_group_metadata,
    ConsumerGroupPartitionMetadataKey: _read_partition_metadata_value,
    ConsumerGroupMemberMetadataKey: _read_member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: _read_target_assignment_metadata,
    ConsumerGroupTargetAssignmentMemberKey: _read_target_assignment_member,
    ConsumerGroupCurrentMemberAssignmentKey: _read_current_member_assignment,
    ConsumerGroupRegularExpressionKey: _read_regular_expression,
}


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    writer = Writer(compact=True)
    writer.int16(VALUE_VERSION)
    _write_value_fields(writer, value)
    return writer.getvalue()


def decode_consumer_group_record(key: ConsumerGroupKey, value: bytes | None) -> ConsumerGroupRecord:
    """The record of a decoded key and its value's bytes (None: a tombstone)."""
    if value is None:
        return cast(ConsumerGroupRecord, (key, None))
    reader = Reader(value, compact=True)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown version {version} of a {type(key).__name__}'s value")
    # _VALUE_READERS pairs each key type with its value type, which the cast states.
    return cast(ConsumerGroupRecord, (key, _VALUE_READERS[type(key)](reader)))
