"""__consumer_offsets records must be byte-compatible with Kafka's, in every schema version."""

from __future__ import annotations

import struct

import pytest
from krust.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    encode_record,
)


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_layout_is_kafkas() -> None:
    key = OffsetCommitKey("my-group", "orders", 7)
    expected = struct.pack(">h", 1) + kafka_string("my-group") + kafka_string("orders")
    expected += struct.pack(">i", 7)
    assert encode_key(key) == expected
    assert decode_key(expected) == key


def test_offset_commit_key_version_zero_is_read_too() -> None:
    data = struct.pack(">h", 0) + kafka_string("g") + kafka_string("t") + struct.pack(">i", 3)
    assert decode_key(data) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_key_layout_is_kafkas() -> None:
    data = struct.pack(">h", 2) + kafka_string("my-group")
    assert encode_key(GroupMetadataKey("my-group")) == data
    assert decode_key(data) == GroupMetadataKey("my-group")


def test_keys_of_share_and_streams_groups_are_not_ours() -> None:
    # Type 10 is a share group's member metadata, 17 a streams group's metadata: skipped, not an
    # error (KIP-848 consumer groups' types are tested in test_consumer_group_records.py).
    assert decode_key(struct.pack(">h", 10) + kafka_string("g")) is None
    assert decode_record(struct.pack(">h", 17) + b"whatever", b"value") is None


def test_offset_commit_value_v3_layout_is_kafkas() -> None:
    value = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1000, leader_epoch=5)
    expected = struct.pack(">hqi", 3, 42, 5) + kafka_string("meta") + struct.pack(">q", 1000)
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_offset_commit_value_with_expire_timestamp_uses_v1() -> None:
    value = OffsetCommitValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=99)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hq", 1, 1) + kafka_string("") + struct.pack(">qq", 10, 99)
    assert decode_offset_commit_value(data) == value


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            struct.pack(">hq", 0, 9) + kafka_string("m") + struct.pack(">q", 5),
            OffsetCommitValue(9, "m", 5),
        ),
        (
            struct.pack(">hq", 2, 9) + kafka_string("m") + struct.pack(">q", 5),
            OffsetCommitValue(9, "m", 5),
        ),
        # v4 is flexible: compact string (length + 1 as a varint) and an empty tagged-field block.
        (
            struct.pack(">hqi", 4, 9, 3) + bytes([2]) + b"m" + struct.pack(">q", 5) + bytes([0]),
            OffsetCommitValue(9, "m", 5, leader_epoch=3),
        ),
        # v4 with an unknown tagged field (tag 7, 2 bytes): skipped.
        (
            struct.pack(">hqi", 4, 9, 3)
            + bytes([1])
            + struct.pack(">q", 5)
            + bytes([1, 7, 2, 0, 0]),
            OffsetCommitValue(9, "", 5, leader_epoch=3),
        ),
    ],
)
def test_every_offset_commit_value_version_decodes(
    data: bytes, expected: OffsetCommitValue
) -> None:
    assert decode_offset_commit_value(data) == expected


MEMBER = MemberMetadata(
    member_id="consumer-1-abc",
    group_instance_id="instance-1",
    client_id="consumer-1",
    client_host="/10.0.0.1",
    rebalance_timeout_ms=300_000,
    session_timeout_ms=45_000,
    subscription=b"\x00\x01sub",
    assignment=b"\x00\x02assign",
)
GROUP = GroupMetadataValue(
    protocol_type="consumer",
    generation=12,
    protocol="range",
    leader="consumer-1-abc",
    current_state_timestamp=1_700_000_000_000,
    members=(MEMBER,),
)


def test_group_metadata_value_v3_layout_is_kafkas() -> None:
    expected = struct.pack(">h", 3) + kafka_string("consumer") + struct.pack(">i", 12)
    expected += kafka_string("range") + kafka_string("consumer-1-abc")
    expected += struct.pack(">q", 1_700_000_000_000) + struct.pack(">i", 1)
    expected += kafka_string("consumer-1-abc") + kafka_string("instance-1")
    expected += kafka_string("consumer-1") + kafka_string("/10.0.0.1")
    expected += struct.pack(">ii", 300_000, 45_000)
    expected += struct.pack(">i", 5) + b"\x00\x01sub" + struct.pack(">i", 8) + b"\x00\x02assign"
    assert encode_group_metadata_value(GROUP) == expected
    assert decode_group_metadata_value(expected) == GROUP


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_group_metadata_value_version_round_trips(version: int) -> None:
    decoded = decode_group_metadata_value(encode_group_metadata_value(GROUP, version))
    # Older versions lack some fields; Kafka's readers fill them the same way.
    member = MEMBER
    if version < 3:
        member = MemberMetadata(**{**MEMBER.__dict__, "group_instance_id": None})
    if version < 1:
        member = MemberMetadata(**{**member.__dict__, "rebalance_timeout_ms": 45_000})
    timestamp = GROUP.current_state_timestamp if version >= 2 else -1
    assert decoded == GroupMetadataValue(
        "consumer", 12, "range", "consumer-1-abc", timestamp, (member,)
    )


def test_empty_group_with_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 3, None, None, 55, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty


def test_tombstones_encode_as_null_values() -> None:
    assert encode_record((OffsetCommitKey("g", "t", 0), None)) == (
        encode_key(OffsetCommitKey("g", "t", 0)),
        None,
    )
    key_bytes = encode_key(GroupMetadataKey("g"))
    assert decode_record(key_bytes, None) == (GroupMetadataKey("g"), None)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        struct.pack(">h", 3) + struct.pack(">q", 1),  # truncated
        struct.pack(">h", 9) + bytes(30),  # unknown version
        struct.pack(">hq", 3, 1) + struct.pack(">i", 0) + struct.pack(">h", 10) + b"abc",
        struct.pack(">hqi", 3, 1, 0) + struct.pack(">h", 2) + b"\xff\xfe" + bytes(8),  # bad UTF-8
    ],
)
def test_malformed_values_raise_record_format_error(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(data)


def test_malformed_keys_raise_record_format_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_record(None, b"value")
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 1) + struct.pack(">h", 40) + b"short")
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", -1))
