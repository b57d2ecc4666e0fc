"""The record schemas of `__consumer_offsets`, byte-compatible with Kafka's own.

Every key starts with an int16 that names the record type: 0 and 1 are OffsetCommitKey (same
layout), 2 is GroupMetadataKey, 3-8 and 16 are KIP-848 consumer groups'
(krust.group.consumer_group_records); the other types belong to Kafka's share and streams groups
and are skipped.
Every value starts with an int16 schema version. A null value is a tombstone (deletion).
Field order follows Kafka's OffsetCommitValue.json / GroupMetadataValue.json; version 4 of both
values is the first flexible (compact, tagged-field) version.
"""

from __future__ import annotations

from dataclasses import dataclass

from krust.coordinator.wire import Reader, RecordFormatError, Writer
from krust.group.consumer_group_records import (
    ConsumerGroupKey,
    ConsumerGroupRecord,
    decode_consumer_group_record,
    encode_consumer_group_key,
    encode_consumer_group_value,
    read_consumer_group_key,
)

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
# What Kafka writes: OffsetCommitValue v3 (v1 only to carry an explicit expire timestamp from
# OffsetCommit v2-v4's retention_time) and GroupMetadataValue v3 (has group.instance.id).
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4
_FIRST_FLEXIBLE_VERSION = 4

__all__ = [
    "OFFSETS_TOPIC",
    "CoordinatorKey",
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecordCodec",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordFormatError",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "encode_record",
]


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


CoordinatorKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey
CoordinatorRecord = (
    tuple[OffsetCommitKey, OffsetCommitValue | None]
    | tuple[GroupMetadataKey, GroupMetadataValue | None]
    | ConsumerGroupRecord
)
"""A key with its value; a None value is a tombstone."""


def encode_key(key: CoordinatorKey) -> bytes:
    if isinstance(key, ConsumerGroupKey):
        return encode_consumer_group_key(key)
    writer = Writer()
    if isinstance(key, OffsetCommitKey):
        writer.int16(OFFSET_COMMIT_KEY_VERSION)
        writer.string(key.group)
        writer.string(key.topic)
        writer.int32(key.partition)
    else:
        writer.int16(GROUP_METADATA_KEY_VERSION)
        writer.string(key.group)
    return writer.getvalue()


def decode_key(data: bytes) -> CoordinatorKey | None:
    """The key, or None for record types this coordinator does not own (share, streams)."""
    reader = Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string())
    if version < 0:
        raise RecordFormatError(f"negative key version {version}")
    return read_consumer_group_key(version, reader)


def _value_reader(data: bytes, name: str) -> tuple[Reader, int]:
    version = Reader(data).int16()
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown {name} version {version}")
    reader = Reader(data[2:], compact=version >= _FIRST_FLEXIBLE_VERSION)
    return reader, version


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = (
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        if value.expire_timestamp >= 0
        else OFFSET_COMMIT_VALUE_VERSION
    )
    writer = Writer()
    writer.int16(version)
    writer.int64(value.offset)
    if version >= 3:
        writer.int32(value.leader_epoch)
    writer.string(value.metadata)
    writer.int64(value.commit_timestamp)
    if version == 1:
        writer.int64(value.expire_timestamp)
    return writer.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    reader, version = _value_reader(data, "OffsetCommitValue")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    reader.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    header = Writer()
    header.int16(version)
    writer = Writer(compact=version >= _FIRST_FLEXIBLE_VERSION)
    writer.string(value.protocol_type)
    writer.int32(value.generation)
    writer.nullable_string(value.protocol)
    writer.nullable_string(value.leader)
    if version >= 2:
        writer.int64(value.current_state_timestamp)
    writer.array_length(len(value.members))
    for member in value.members:
        _write_member(writer, member, version)
    writer.empty_tagged_fields()
    return header.getvalue() + writer.getvalue()


def _write_member(writer: Writer, member: MemberMetadata, version: int) -> None:
    writer.string(member.member_id)
    if version >= 3:
        writer.nullable_string(member.group_instance_id)
    writer.string(member.client_id)
    writer.string(member.client_host)
    if version >= 1:
        writer.int32(member.rebalance_timeout_ms)
    writer.int32(member.session_timeout_ms)
    writer.bytes_field(member.subscription)
    writer.bytes_field(member.assignment)
    writer.empty_tagged_fields()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    reader, version = _value_reader(data, "GroupMetadataValue")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    members = tuple(_read_member(reader, version) for _ in range(reader.array_length()))
    reader.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, members
    )


def _read_member(reader: Reader, version: int) -> MemberMetadata:
    member_id = reader.string()
    group_instance_id = reader.nullable_string() if version >= 3 else None
    client_id = reader.string()
    client_host = reader.string()
    session_timeout_ms = reader.int32()
    # Version 0 has no rebalance timeout: Kafka then uses the session timeout for both.
    rebalance_timeout_ms = session_timeout_ms
    if version >= 1:
        rebalance_timeout_ms, session_timeout_ms = session_timeout_ms, reader.int32()
    subscription = reader.bytes_field()
    assignment = reader.bytes_field()
    reader.skip_tagged_fields()
    return MemberMetadata(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        subscription,
        assignment,
    )


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    if value is None:
        return encode_key(key), None
    if isinstance(value, OffsetCommitValue):
        return encode_key(key), encode_offset_commit_value(value)
    if isinstance(value, GroupMetadataValue):
        return encode_key(key), encode_group_metadata_value(value)
    return encode_key(key), encode_consumer_group_value(value)


def decode_record(key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """The record, or None for a record type this coordinator does not own."""
    if key is None:
        raise RecordFormatError("record without a key")
    decoded = decode_key(key)
    if isinstance(decoded, OffsetCommitKey):
        return decoded, None if value is None else decode_offset_commit_value(value)
    if isinstance(decoded, GroupMetadataKey):
        return decoded, None if value is None else decode_group_metadata_value(value)
    if decoded is None:
        return None
    return decode_consumer_group_record(decoded, value)


class GroupRecordCodec:
    """`__consumer_offsets`' record format for the coordinator runtime's log."""

    def encode(self, record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
        return encode_record(record)

    def decode(self, key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
        return decode_record(key, value)
