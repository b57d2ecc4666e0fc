"""Properties of the coordinators' record codecs: `__consumer_offsets` (krust.group.records, with
the KIP-848 records of krust.group.consumer_group_records), `__transaction_state`
(krust.transaction.records) and the embedded consumer protocol
(krust.group.consumer.consumer_protocol), over the primitives of krust.coordinator.wire.

- decode(encode(r)) == r for generated records of every type, tombstones included, and the
  encoding of the decoded record is the same bytes; where a schema version cannot hold a field
  (OffsetCommitValue v1's leader epoch, GroupMetadataValue v0-v2), it reads back as Kafka's
  default;
- truncated, forged and arbitrary bytes are refused with RecordFormatError, never another
  exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from krust.coordinator.wire import RecordFormatError, Writer
from krust.group import consumer_group_records as cg
from krust.group.consumer.consumer_protocol import (
    HIGHEST_VERSION,
    Subscription,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    subscription_version,
)
from krust.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_record,
    encode_group_metadata_value,
    encode_key,
    encode_record,
)
from krust.transaction import records as txn
from krust.transaction.metadata import (
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionState,
    TxnTransit,
)

INT8 = st.integers(-(2**7), 2**7 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UUIDS = st.uuids(allow_nil=True)
# Mostly short, sometimes past one varint byte; a non-flexible string holds at most 32767 bytes.
TEXT = st.one_of(
    st.text(max_size=10),
    st.builds(lambda char, count: char * count, st.characters(codec="utf-8"), st.integers(64, 200)),
)
BYTES = st.one_of(st.binary(max_size=10), st.binary(min_size=128, max_size=300))


def tuples(items: st.SearchStrategy[Any], max_size: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(items, max_size=max_size).map(tuple)


def optional(items: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | items


# -- __consumer_offsets: classic groups and offsets ---------------------------------------------

OFFSET_COMMIT_VALUES = st.one_of(
    # Written as version 3: the leader epoch, no expire timestamp.
    st.builds(OffsetCommitValue, INT64, TEXT, INT64, INT32, st.just(-1)),
    # Written as version 1 (an explicit expiry, OffsetCommit v2-v4): no leader epoch.
    st.builds(OffsetCommitValue, INT64, TEXT, INT64, st.just(-1), st.integers(0, 2**63 - 1)),
)
MEMBERS = st.builds(MemberMetadata, TEXT, optional(TEXT), TEXT, TEXT, INT32, INT32, BYTES, BYTES)
GROUP_METADATA_VALUES = st.builds(
    GroupMetadataValue, TEXT, INT32, optional(TEXT), optional(TEXT), INT64, tuples(MEMBERS)
)

# -- __consumer_offsets: KIP-848 consumer groups ------------------------------------------------

_TARGET_PARTITIONS = st.builds(cg.TopicPartitions, UUIDS, tuples(INT32, 5), st.none())
_CURRENT_PARTITIONS = st.builds(
    cg.TopicPartitions, UUIDS, tuples(INT32, 5), optional(tuples(INT32, 5))
)
_CLASSIC_MEMBER = st.builds(
    cg.ClassicMemberMetadata, INT32, tuples(st.builds(cg.ClassicProtocol, TEXT, BYTES))
)
_TOPIC_METADATA = st.builds(
    cg.TopicMetadata,
    UUIDS,
    TEXT,
    INT32,
    tuples(st.builds(cg.PartitionMetadata, INT32, tuples(TEXT))),
)
CONSUMER_GROUP_RECORDS: list[tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = [
    (
        st.builds(cg.ConsumerGroupMetadataKey, TEXT),
        st.builds(cg.ConsumerGroupMetadataValue, INT32, INT64),
    ),
    (
        st.builds(cg.ConsumerGroupPartitionMetadataKey, TEXT),
        st.builds(cg.ConsumerGroupPartitionMetadataValue, tuples(_TOPIC_METADATA)),
    ),
    (
        st.builds(cg.ConsumerGroupMemberMetadataKey, TEXT, TEXT),
        st.builds(
            cg.ConsumerGroupMemberMetadataValue,
            optional(TEXT),
            optional(TEXT),
            TEXT,
            TEXT,
            tuples(TEXT),
            optional(TEXT),
            INT32,
            optional(TEXT),
            optional(_CLASSIC_MEMBER),
        ),
    ),
    (
        st.builds(cg.ConsumerGroupTargetAssignmentMetadataKey, TEXT),
        st.builds(cg.ConsumerGroupTargetAssignmentMetadataValue, INT32, INT64),
    ),
    (
        st.builds(cg.ConsumerGroupTargetAssignmentMemberKey, TEXT, TEXT),
        st.builds(cg.ConsumerGroupTargetAssignmentMemberValue, tuples(_TARGET_PARTITIONS)),
    ),
    (
        st.builds(cg.ConsumerGroupCurrentMemberAssignmentKey, TEXT, TEXT),
        st.builds(
            cg.ConsumerGroupCurrentMemberAssignmentValue,
            INT32,
            INT32,
            INT8,
            tuples(_CURRENT_PARTITIONS),
            tuples(_CURRENT_PARTITIONS),
        ),
    ),
    (
        st.builds(cg.ConsumerGroupRegularExpressionKey, TEXT, TEXT),
        st.builds(cg.ConsumerGroupRegularExpressionValue, tuples(TEXT), INT64, INT64),
    ),
]

GROUP_RECORDS = st.one_of(
    st.tuples(st.builds(OffsetCommitKey, TEXT, TEXT, INT32), optional(OFFSET_COMMIT_VALUES)),
    st.tuples(st.builds(GroupMetadataKey, TEXT), optional(GROUP_METADATA_VALUES)),
    *(st.tuples(keys, optional(values)) for keys, values in CONSUMER_GROUP_RECORDS),
)


@given(GROUP_RECORDS)
def test_consumer_offsets_records_round_trip(record: Any) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record
    assert encode_record(decode_record(key, value)) == (key, value)  # type: ignore[arg-type]


def _as_written(value: GroupMetadataValue, version: int) -> GroupMetadataValue:
    """What a GroupMetadataValue of `version` can hold: v3 added the instance id, v2 the state
    timestamp, v1 the rebalance timeout (version 0 uses the session timeout for both)."""
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms if version >= 1 else m.session_timeout_ms,
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        )
        for m in value.members
    )
    timestamp = value.current_state_timestamp if version >= 2 else -1
    return GroupMetadataValue(
        value.protocol_type, value.generation, value.protocol, value.leader, timestamp, members
    )


@given(GROUP_METADATA_VALUES, st.integers(0, 4))
def test_group_metadata_values_of_every_version_read_back(
    value: GroupMetadataValue, version: int
) -> None:
    encoded = encode_group_metadata_value(value, version)
    assert decode_group_metadata_value(encoded) == _as_written(value, version)


# -- __transaction_state ------------------------------------------------------------------------


@st.composite
def transits(draw: st.DrawFn, version: int) -> TxnTransit:
    state = draw(st.sampled_from(TransactionState))
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TransactionState.EMPTY:
        partitions = draw(st.frozensets(st.builds(TopicPartition, TEXT, INT32), max_size=5))
    return TxnTransit(
        producer_id=draw(INT64),
        # Neither is written (Kafka writes neither) and both read back as "none".
        prev_producer_id=NO_PRODUCER_ID,
        next_producer_id=NO_PRODUCER_ID,
        producer_epoch=draw(INT16),
        last_producer_epoch=-1,  # not part of the record
        txn_timeout_ms=draw(INT32),
        state=state,
        partitions=partitions,
        txn_start_timestamp=draw(INT64),
        txn_last_update_timestamp=draw(INT64),
        # A version 1 (flexible) field only.
        client_transaction_version=draw(INT16) if version >= 1 else 0,
    )


TRANSACTION_RECORDS = st.one_of(
    [st.tuples(st.just(version), TEXT, optional(transits(version))) for version in (0, 1)]
)


@given(TRANSACTION_RECORDS)
def test_transaction_state_records_round_trip(record: tuple[int, str, TxnTransit | None]) -> None:
    version, transactional_id, transit = record
    codec = txn.TransactionRecordCodec(version)
    key, value = codec.encode((transactional_id, transit))
    assert codec.decode(key, value) == (transactional_id, transit)
    assert codec.encode((transactional_id, transit)) == (key, value)


# -- the embedded consumer protocol -------------------------------------------------------------

PARTITIONS_BY_NAME = tuples(st.tuples(TEXT, tuples(INT32, 5)))


@given(PARTITIONS_BY_NAME, st.integers(0, HIGHEST_VERSION))
def test_consumer_protocol_assignments_round_trip(partitions: Any, version: int) -> None:
    assert parse_assignment(serialize_assignment(partitions, version)) == partitions


def _subscription_bytes(
    version: int, topics: tuple[str, ...], user_data: bytes | None, owned: Any, rack: str | None
) -> bytes:
    """A ConsumerProtocolSubscription as Kafka's clients write it."""
    writer = Writer()
    writer.int16(version)
    writer.int32(len(topics))
    for topic in topics:
        writer.string(topic)
    writer.int32(-1 if user_data is None else len(user_data))
    writer._buffer += user_data or b""
    if version >= 1:
        writer.int32(len(owned))
        for topic, numbers in owned:
            writer.string(topic)
            writer.int32(len(numbers))
            for number in numbers:
                writer.int32(number)
    if version >= 2:
        writer.int32(7)  # generation id
    if version >= 3:
        writer.nullable_string(rack)
    return writer.getvalue()


@given(
    st.integers(0, HIGHEST_VERSION + 2),
    tuples(TEXT),
    optional(BYTES),
    PARTITIONS_BY_NAME,
    optional(TEXT),
)
def test_consumer_protocol_subscriptions_read_back(
    version: int, topics: Any, user_data: bytes | None, owned: Any, rack: str | None
) -> None:
    """Every version's fields, and a newer version's as far as krust knows them (Kafka's
    forward compatibility: a newer subscription starts with every older field)."""
    data = _subscription_bytes(version, topics, user_data, owned, rack)
    assert parse_subscription(data) == Subscription(
        topics, owned if version >= 1 else (), rack if version >= 3 else None
    )
    assert subscription_version(data) == min(version, HIGHEST_VERSION)


# -- refusing what is not a record --------------------------------------------------------------


# How to damage an encoding: truncate it, flip a byte, or write a forged length (a negative
# int16 or int32, a huge one, a long varint) over it or into it, at a position modulo its size.
DAMAGE = st.tuples(
    st.sampled_from(["truncate", "flip", "overwrite", "insert"]),
    st.integers(0, 2**16),
    st.integers(1, 255),
    st.sampled_from(
        [
            b"\xff\xff",
            b"\x7f\xff",
            b"\xff\xff\xff\xff",
            b"\x7f\xff\xff\xff",
            b"\xff\xff\xff\xff\x0f",
        ]
    ),
)


def damaged(encoded: bytes, damage: tuple[str, int, int, bytes]) -> bytes:
    how, position, mask, forged = damage
    position %= max(len(encoded), 1)
    if how == "truncate":
        return encoded[:position]
    if how == "flip":
        mutated = bytearray(encoded)
        if mutated:
            mutated[position] ^= mask
        return bytes(mutated)
    end = position + (len(forged) if how == "overwrite" else 0)
    return encoded[:position] + forged + encoded[end:]


def _refused_or_read(decode: Callable[[], object]) -> None:
    with contextlib.suppress(RecordFormatError):
        decode()


@given(GROUP_RECORDS, DAMAGE, DAMAGE)
def test_damaged_consumer_offsets_records_are_refused_or_read(
    record: Any, key_damage: Any, value_damage: Any
) -> None:
    key, value = encode_record(record)
    damaged_key = damaged(key, key_damage)
    damaged_value = None if value is None else damaged(value, value_damage)
    _refused_or_read(lambda: decode_record(damaged_key, value))
    _refused_or_read(lambda: decode_record(key, damaged_value))


@given(TRANSACTION_RECORDS, DAMAGE, DAMAGE)
def test_damaged_transaction_state_records_are_refused_or_read(
    record: tuple[int, str, TxnTransit | None], key_damage: Any, value_damage: Any
) -> None:
    version, transactional_id, transit = record
    codec = txn.TransactionRecordCodec(version)
    key, value = codec.encode((transactional_id, transit))
    damaged_key = damaged(key, key_damage)
    damaged_value = None if value is None else damaged(value, value_damage)
    _refused_or_read(lambda: codec.decode(damaged_key, value))
    _refused_or_read(lambda: codec.decode(key, damaged_value))


@given(st.integers(0, HIGHEST_VERSION), tuples(TEXT), PARTITIONS_BY_NAME, DAMAGE, DAMAGE)
def test_damaged_consumer_protocol_data_is_refused_or_read(
    version: int, topics: Any, owned: Any, subscription_damage: Any, assignment_damage: Any
) -> None:
    subscription = _subscription_bytes(version, topics, None, owned, None)
    assignment = serialize_assignment(owned, version)
    damaged_subscription = damaged(subscription, subscription_damage)
    damaged_assignment = damaged(assignment, assignment_damage)
    _refused_or_read(lambda: parse_subscription(damaged_subscription))
    _refused_or_read(lambda: parse_assignment(damaged_assignment))


_KEYS = [
    OffsetCommitKey("g", "t", 0),
    GroupMetadataKey("g"),
    cg.ConsumerGroupMetadataKey("g"),
    cg.ConsumerGroupPartitionMetadataKey("g"),
    cg.ConsumerGroupMemberMetadataKey("g", "m"),
    cg.ConsumerGroupTargetAssignmentMetadataKey("g"),
    cg.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
    cg.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
    cg.ConsumerGroupRegularExpressionKey("g", "r.*"),
]


def _value_decoder(key: bytes) -> Callable[[bytes], object]:
    return lambda data: decode_record(key, data)


_DECODERS: dict[str, Callable[[bytes], object]] = {
    **{type(key).__name__: _value_decoder(encode_key(key)) for key in _KEYS},
    "any-key": lambda data: decode_record(data, None),
    "TransactionLogValue": txn.decode_value,
    "ConsumerProtocolSubscription": parse_subscription,
    "ConsumerProtocolAssignment": parse_assignment,
}


@pytest.mark.parametrize("decode", _DECODERS.values(), ids=_DECODERS)
@given(version=st.integers(-1, 5), value=st.binary(max_size=48))
def test_arbitrary_bytes_are_refused_or_read(
    decode: Callable[[bytes], object], version: int, value: bytes
) -> None:
    """Any bytes after a plausible version (or record type) number."""
    _refused_or_read(lambda: decode(version.to_bytes(2, "big", signed=True) + value))
