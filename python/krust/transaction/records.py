"""The records of `__transaction_state`, byte-compatible with Kafka's TransactionLog.

Key: int16 version (0), then the transactional id as a string (TransactionLogKey.json).
Value: int16 version, then TransactionLogValue.json's fields; version 1 is flexible (compact
lengths, tagged fields: 0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion). Kafka
sets only ClientTransactionVersion, which its generated code writes when not 0; all three are
read. A null value is a tombstone: the id expired. Kafka writes value version 1 once
`transaction.version` >= 1 is finalized, version 0 before.
"""

from __future__ import annotations

from krust.coordinator.wire import Reader, RecordFormatError, Writer
from krust.transaction.metadata import (
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionState,
    TxnTransit,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
_MAX_VALUE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

TransactionRecord = tuple[str, TxnTransit | None]
"""A transactional id and its new state, or None for a tombstone."""


def value_version(transaction_version: int) -> int:
    """The value version Kafka writes at a finalized `transaction.version` level."""
    return 1 if transaction_version >= 1 else 0


def encode_key(transactional_id: str) -> bytes:
    writer = Writer()
    writer.int16(KEY_VERSION)
    writer.string(transactional_id)
    return writer.getvalue()


def decode_key(data: bytes) -> str | None:
    """The transactional id; None for a key version this coordinator does not know."""
    reader = Reader(data)
    if reader.int16() != KEY_VERSION:
        return None
    return reader.string()


def encode_value(transit: TxnTransit, version: int) -> bytes:
    if transit.state is TransactionState.EMPTY and transit.partitions:
        raise ValueError("an Empty transaction has no partitions")
    writer = Writer(compact=version >= 1)
    writer.int16(version)
    writer.int64(transit.producer_id)
    writer.int16(transit.producer_epoch)
    writer.int32(transit.txn_timeout_ms)
    writer.int8(transit.state.id)
    if transit.state is TransactionState.EMPTY:
        writer.array_length(None)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.partitions):
            by_topic.setdefault(topic, []).append(partition)
        writer.array_length(len(by_topic))
        for topic, partitions in by_topic.items():
            writer.string(topic)
            writer.array_length(len(partitions))
            for partition in partitions:
                writer.int32(partition)
            writer.empty_tagged_fields()
    writer.int64(transit.txn_last_update_timestamp)
    writer.int64(transit.txn_start_timestamp)
    if version >= 1:
        tagged: dict[int, bytes] = {}
        if transit.client_transaction_version != 0:
            field = Writer()
            field.int16(transit.client_transaction_version)
            tagged[_TAG_CLIENT_TRANSACTION_VERSION] = field.getvalue()
        writer.tagged_fields(tagged)
    return writer.getvalue()


def decode_value(data: bytes) -> TxnTransit:
    version = Reader(data).int16()
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    reader = Reader(data, compact=version >= 1)
    reader.int16()
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    timeout_ms = reader.int32()
    try:
        state = TransactionState.from_id(reader.int8())
    except ValueError as error:
        raise RecordFormatError(str(error)) from error
    partitions: set[TopicPartition] = set()
    for _ in range(reader.nullable_array_length() or 0):
        topic = reader.string()
        for _ in range(reader.array_length()):
            partitions.add(TopicPartition(topic, reader.int32()))
        reader.skip_tagged_fields()
    last_update = reader.int64()
    start = reader.int64()
    tagged = reader.tagged_fields()
    return TxnTransit(
        producer_id=producer_id,
        prev_producer_id=_tagged_int(tagged, _TAG_PREVIOUS_PRODUCER_ID, 8, NO_PRODUCER_ID),
        next_producer_id=_tagged_int(tagged, _TAG_NEXT_PRODUCER_ID, 8, NO_PRODUCER_ID),
        producer_epoch=producer_epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=timeout_ms,
        state=state,
        # Kafka ignores the partitions of an Empty record.
        partitions=frozenset() if state is TransactionState.EMPTY else frozenset(partitions),
        txn_start_timestamp=start,
        txn_last_update_timestamp=last_update,
        client_transaction_version=_tagged_int(tagged, _TAG_CLIENT_TRANSACTION_VERSION, 2, 0),
    )


def _tagged_int(tagged: dict[int, bytes], tag: int, size: int, default: int) -> int:
    data = tagged.get(tag)
    if data is None:
        return default
    if len(data) != size:
        raise RecordFormatError(f"tagged field {tag} has {len(data)} bytes, not {size}")
    return int.from_bytes(data, "big", signed=True)


class TransactionRecordCodec:
    """`RecordCodec` of `__transaction_state` for the coordinator runtime's CoordinatorLog."""

    def __init__(self, value_version: int = 0) -> None:
        self.value_version = value_version

    def encode(self, record: TransactionRecord) -> tuple[bytes, bytes | None]:
        transactional_id, transit = record
        value = None if transit is None else encode_value(transit, self.value_version)
        return encode_key(transactional_id), value

    def decode(self, key: bytes | None, value: bytes | None) -> TransactionRecord | None:
        if key is None:
            raise RecordFormatError("a __transaction_state record without a key")
        transactional_id = decode_key(key)
        if transactional_id is None:
            return None
        return transactional_id, None if value is None else decode_value(value)
