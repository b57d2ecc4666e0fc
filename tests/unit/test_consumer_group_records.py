"""KIP-848 consumer groups' records in __consumer_offsets: the bytes of Kafka 4.3's schemas.

The expected bytes are built by hand from Kafka's ConsumerGroup*.json: a key is the int16 record
type and non-flexible strings; a value is version 0 in the flexible form (compact lengths, a
tagged-field block closing every struct).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from uuid import UUID

import pytest
from krust.coordinator.log import CoordinatorLog
from krust.group.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecord,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from krust.group.loader import load_partition
from krust.group.records import (
    OFFSETS_TOPIC,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordCodec,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_record,
    encode_key,
    encode_record,
)

from .doubles.group import FakeCore, async_test

ORDERS = UUID("3c6b1a2e-8f4d-4b7a-9e21-5d0c7f9a1b42")
PAYMENTS = UUID("00000000-0000-0000-0000-000000000001")
NO_TAGS = b"\x00"
NULL = b"\x00"  # a compact null string or array
VERSION_0 = struct.pack(">h", 0)


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def compact_string(text: str) -> bytes:
    # Every string here is shorter than 127 bytes: its unsigned varint length + 1 is one byte.
    return bytes([len(text) + 1]) + text.encode()


def compact_array(count: int) -> bytes:
    return bytes([count + 1])


def tag_zero(data: bytes) -> bytes:
    """A tagged-field block holding tag 0 only: count 1, tag 0, size, data."""
    return b"\x01\x00" + bytes([len(data)]) + data


MEMBER = ConsumerGroupMemberMetadataValue(
    instance_id="instance-1",
    rack_id=None,
    client_id="client",
    client_host="/10.0.0.1",
    subscribed_topic_names=("orders", "payments"),
    subscribed_topic_regex=None,
    rebalance_timeout_ms=30000,
    server_assignor="uniform",
)
MEMBER_BYTES = (
    VERSION_0
    + compact_string("instance-1")
    + NULL
    + compact_string("client")
    + compact_string("/10.0.0.1")
    + compact_array(2)
    + compact_string("orders")
    + compact_string("payments")
    + NULL
    + i32(30000)
    + compact_string("uniform")
)
CLASSIC_MEMBER = ConsumerGroupMemberMetadataValue(
    instance_id=None,
    rack_id="rack-a",
    client_id="classic",
    client_host="/10.0.0.2",
    subscribed_topic_names=("orders",),
    subscribed_topic_regex="pay.*",
    rebalance_timeout_ms=60000,
    server_assignor=None,
    classic_member_metadata=ClassicMemberMetadata(
        session_timeout_ms=45000,
        supported_protocols=(ClassicProtocol("range", b"\x00\x01"), ClassicProtocol("rr", b"")),
    ),
)
# A nullable struct starts with an int8: 1 present, -1 null.
CLASSIC_BYTES = (
    i8(1)
    + i32(45000)
    + compact_array(2)
    + compact_string("range")
    + b"\x03\x00\x01"
    + NO_TAGS
    + compact_string("rr")
    + b"\x01"
    + NO_TAGS
    + NO_TAGS
)

# (key, its bytes, value, its bytes) for each record type; a value's bytes end with its tags.
RECORDS: list[tuple[ConsumerGroupKey, bytes, object, bytes]] = [
    (
        ConsumerGroupMetadataKey("g"),
        struct.pack(">h", 3) + string("g"),
        ConsumerGroupMetadataValue(epoch=42),
        VERSION_0 + i32(42) + NO_TAGS,
    ),
    (
        ConsumerGroupMetadataKey("g"),
        struct.pack(">h", 3) + string("g"),
        ConsumerGroupMetadataValue(epoch=42, metadata_hash=-8_000_000_000),
        VERSION_0 + i32(42) + tag_zero(i64(-8_000_000_000)),
    ),
    (
        ConsumerGroupPartitionMetadataKey("g"),
        struct.pack(">h", 4) + string("g"),
        ConsumerGroupPartitionMetadataValue(
            topics=(
                TopicMetadata(ORDERS, "orders", 3, (PartitionMetadata(0, ("r1", "r2")),)),
                TopicMetadata(PAYMENTS, "payments", 1),
            )
        ),
        VERSION_0
        + compact_array(2)
        + ORDERS.bytes
        + compact_string("orders")
        + i32(3)
        + compact_array(1)
        + i32(0)
        + compact_array(2)
        + compact_string("r1")
        + compact_string("r2")
        + NO_TAGS
        + NO_TAGS
        + PAYMENTS.bytes
        + compact_string("payments")
        + i32(1)
        + compact_array(0)
        + NO_TAGS
        + NO_TAGS,
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "member-1"),
        struct.pack(">h", 5) + string("g") + string("member-1"),
        MEMBER,
        MEMBER_BYTES + NO_TAGS,
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "member-2"),
        struct.pack(">h", 5) + string("g") + string("member-2"),
        CLASSIC_MEMBER,
        VERSION_0
        + NULL
        + compact_string("rack-a")
        + compact_string("classic")
        + compact_string("/10.0.0.2")
        + compact_array(1)
        + compact_string("orders")
        + compact_string("pay.*")
        + i32(60000)
        + NULL
        + tag_zero(CLASSIC_BYTES),
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        struct.pack(">h", 6) + string("g"),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=7),
        VERSION_0 + i32(7) + NO_TAGS,
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        struct.pack(">h", 6) + string("g"),
        ConsumerGroupTargetAssignmentMetadataValue(7, assignment_timestamp=1_700_000_000_000),
        VERSION_0 + i32(7) + tag_zero(i64(1_700_000_000_000)),
    ),
    (
        ConsumerGroupTargetAssignmentMemberKey("g", "member-1"),
        struct.pack(">h", 7) + string("g") + string("member-1"),
        ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=(TopicPartitions(ORDERS, (0, 2)), TopicPartitions(PAYMENTS, ()))
        ),
        VERSION_0
        + compact_array(2)
        + ORDERS.bytes
        + compact_array(2)
        + i32(0)
        + i32(2)
        + NO_TAGS
        + PAYMENTS.bytes
        + compact_array(0)
        + NO_TAGS
        + NO_TAGS,
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "member-1"),
        struct.pack(">h", 8) + string("g") + string("member-1"),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=5,
            previous_member_epoch=4,
            state=1,
            assigned_partitions=(TopicPartitions(ORDERS, (0, 2), assignment_epochs=(3, 5)),),
            partitions_pending_revocation=(TopicPartitions(PAYMENTS, (1,)),),
        ),
        VERSION_0
        + i32(5)
        + i32(4)
        + i8(1)
        + compact_array(1)
        + ORDERS.bytes
        + compact_array(2)
        + i32(0)
        + i32(2)
        + tag_zero(compact_array(2) + i32(3) + i32(5))
        + compact_array(1)
        + PAYMENTS.bytes
        + compact_array(1)
        + i32(1)
        + NO_TAGS
        + NO_TAGS,
    ),
    (
        ConsumerGroupRegularExpressionKey("g", "orders-.*"),
        struct.pack(">h", 16) + string("g") + string("orders-.*"),
        ConsumerGroupRegularExpressionValue(
            topics=("orders-eu", "orders-us"), version=12, timestamp=1_700_000_000_123
        ),
        VERSION_0
        + compact_array(2)
        + compact_string("orders-eu")
        + compact_string("orders-us")
        + i64(12)
        + i64(1_700_000_000_123)
        + NO_TAGS,
    ),
]
RECORD_IDS = [f"{type(value).__name__}-{index}" for index, (_, _, value, _) in enumerate(RECORDS)]


def record(key: ConsumerGroupKey, value: object) -> ConsumerGroupRecord:
    return (key, value)  # type: ignore[return-value]


@pytest.mark.parametrize(("key", "key_bytes", "value", "value_bytes"), RECORDS, ids=RECORD_IDS)
def test_records_are_written_as_kafka_writes_them_and_read_back(
    key: ConsumerGroupKey, key_bytes: bytes, value: object, value_bytes: bytes
) -> None:
    assert encode_key(key) == key_bytes
    assert decode_key(key_bytes) == key
    assert encode_record(record(key, value)) == (key_bytes, value_bytes)
    assert decode_record(key_bytes, value_bytes) == (key, value)
    assert GroupRecordCodec().decode(*GroupRecordCodec().encode(record(key, value))) == (key, value)


@pytest.mark.parametrize(("key", "key_bytes"), [(k, kb) for k, kb, _, _ in RECORDS], ids=RECORD_IDS)
def test_tombstones_are_a_key_with_a_null_value(key: ConsumerGroupKey, key_bytes: bytes) -> None:
    assert encode_record(record(key, None)) == (key_bytes, None)
    assert decode_record(key_bytes, None) == (key, None)


def test_values_kafka_wrote_before_its_tagged_fields_read_with_their_defaults() -> None:
    """Kafka 3.8 to 4.2 wrote version 0 without the tags added later: no metadata hash (4.1),
    no assignment epochs or timestamp (4.3); 4.0 wrote an empty PartitionMetadata list."""
    metadata = struct.pack(">h", 3) + string("g")
    assert decode_record(metadata, VERSION_0 + i32(9) + NO_TAGS) == (
        ConsumerGroupMetadataKey("g"),
        ConsumerGroupMetadataValue(epoch=9, metadata_hash=0),
    )
    current = struct.pack(">h", 8) + string("g") + string("m")
    topic = ORDERS.bytes + compact_array(1) + i32(3) + NO_TAGS
    value = VERSION_0 + i32(2) + i32(1) + i8(0) + compact_array(1) + topic + compact_array(0)
    decoded = decode_record(current, value + NO_TAGS)
    assert decoded is not None
    assert decoded[1] == ConsumerGroupCurrentMemberAssignmentValue(
        2, 1, 0, (TopicPartitions(ORDERS, (3,), assignment_epochs=None),), ()
    )
    partition_metadata = struct.pack(">h", 4) + string("g")
    topic_40 = ORDERS.bytes + compact_string("orders") + i32(6) + compact_array(0) + NO_TAGS
    assert decode_record(partition_metadata, VERSION_0 + compact_array(1) + topic_40 + NO_TAGS) == (
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue((TopicMetadata(ORDERS, "orders", 6, ()),)),
    )


def test_tags_this_version_does_not_know_are_skipped() -> None:
    """A newer Kafka's tag (e.g. ConsumerGroupMetadataValue's CreationTimeMs, tag 1, KIP-1282)."""
    tags = b"\x02" + b"\x00\x08" + i64(77) + b"\x01\x08" + i64(1_700_000_000_000)
    decoded = decode_record(struct.pack(">h", 3) + string("g"), VERSION_0 + i32(1) + tags)
    assert decoded == (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1, 77))
    target = struct.pack(">h", 7) + string("g") + string("m")
    # Only a current assignment's TopicPartitions has tag 0 (its epochs); a target's skips it.
    topic = ORDERS.bytes + compact_array(1) + i32(0) + tag_zero(compact_array(1) + i32(4))
    decoded = decode_record(target, VERSION_0 + compact_array(1) + topic + NO_TAGS)
    assert decoded is not None
    assert decoded[1] == ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(ORDERS, (0,)),))


def test_a_null_classic_member_metadata_tag_reads_as_none() -> None:
    key = struct.pack(">h", 5) + string("g") + string("member-1")
    decoded = decode_record(key, MEMBER_BYTES + tag_zero(i8(-1)))
    assert decoded == (ConsumerGroupMemberMetadataKey("g", "member-1"), MEMBER)


def test_a_target_assignment_cannot_carry_assignment_epochs() -> None:
    value = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(ORDERS, (0,), (1,)),))
    with pytest.raises(ValueError, match="assignment epochs"):
        encode_record((ConsumerGroupTargetAssignmentMemberKey("g", "m"), value))


@pytest.mark.parametrize(("key", "key_bytes", "value", "value_bytes"), RECORDS, ids=RECORD_IDS)
def test_every_truncation_is_a_record_format_error(
    key: ConsumerGroupKey, key_bytes: bytes, value: object, value_bytes: bytes
) -> None:
    for end in range(len(key_bytes)):
        with pytest.raises(RecordFormatError):
            decode_record(key_bytes[:end], value_bytes)
    for end in range(len(value_bytes)):
        with pytest.raises(RecordFormatError):
            decode_record(key_bytes, value_bytes[:end])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # Value version 1 does not exist (yet): Kafka refuses it too.
        (struct.pack(">h", 3) + string("g"), struct.pack(">h", 1) + i32(1) + NO_TAGS),
        (struct.pack(">h", 3) + string("g"), struct.pack(">h", -1) + i32(1) + NO_TAGS),
        # A null client id, which the schema does not allow.
        (
            struct.pack(">h", 5) + string("g") + string("m"),
            VERSION_0 + NULL + NULL + NULL + compact_string("h") + compact_array(0),
        ),
        # A metadata hash tag of 4 bytes where an int64 belongs.
        (struct.pack(">h", 3) + string("g"), VERSION_0 + i32(1) + tag_zero(i32(1))),
        # Invalid UTF-8 in a key's member id and in a value's topic name.
        (struct.pack(">h", 7) + string("g") + b"\x00\x02\xc3\x28", VERSION_0 + b"\x01\x00"),
        (
            struct.pack(">h", 16) + string("g") + string("r"),
            VERSION_0 + compact_array(1) + b"\x03\xff\xfe" + i64(0) + i64(0) + NO_TAGS,
        ),
        # A varint that never ends.
        (struct.pack(">h", 7) + string("g") + string("m"), VERSION_0 + b"\xff" * 6),
    ],
)
def test_garbage_is_a_record_format_error(key: bytes, value: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_record(key, value)


@pytest.mark.parametrize("record_type", [*range(9, 16), *range(17, 24)])
def test_share_and_streams_group_records_are_not_ours(record_type: int) -> None:
    key = struct.pack(">h", record_type) + string("g") + string("member-1")
    assert decode_key(key) is None
    assert decode_record(key, b"not parsed") is None
    assert decode_record(key, None) is None


@async_test
async def test_the_classic_loader_passes_over_consumer_group_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = FakeCore()
    codec = GroupRecordCodec()
    log: CoordinatorLog[CoordinatorRecord] = CoordinatorLog(
        core, asyncio.get_running_loop(), OFFSETS_TOPIC, codec
    )
    offset_key = OffsetCommitKey("classic", "orders", 0)
    offset_value = OffsetCommitValue(offset=12, metadata="", commit_timestamp=5)
    group_value = GroupMetadataValue("consumer", 1, "range", None, 5, ())
    await log.append(0, [(offset_key, offset_value), (GroupMetadataKey("classic"), group_value)])
    await log.append(0, [record(key, value) for key, _, value, _ in RECORDS])
    await log.append(0, [record(key, None) for key, _, _, _ in RECORDS])

    with caplog.at_level(logging.WARNING):
        loaded = await load_partition(log, 0, 1 << 20, now_ms=10)

    assert (loaded.stats.records, loaded.stats.skipped) == (2 + 2 * len(RECORDS), 0)
    assert not caplog.records
    assert set(loaded.groups) == {"classic"}
    stored = loaded.offsets.get("classic", ("orders", 0))
    assert stored is not None and stored.offset == 12
