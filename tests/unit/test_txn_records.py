"""`__transaction_state` records, byte for byte as Kafka's TransactionLog writes them.

The samples are spelled out from TransactionLogKey.json / TransactionLogValue.json: big-endian
ints, int16-length strings and int32-length arrays in version 0; compact (unsigned varint
length + 1) strings and arrays, per-struct tagged-field blocks in the flexible version 1."""

from __future__ import annotations

import pytest
from krust.transaction.metadata import TopicPartition, TransactionState, TxnTransit
from krust.transaction.records import TransactionRecordCodec, decode_value, encode_key

LAST_UPDATE = "0000018bcfe5687b"  # 1700000000123
START = "0000018bcfe56800"  # 1700000000000


def ongoing(**overrides: object) -> TxnTransit:
    fields: dict[str, object] = {
        "producer_id": 1000,
        "prev_producer_id": -1,
        "next_producer_id": -1,
        "producer_epoch": 5,
        "last_producer_epoch": -1,
        "txn_timeout_ms": 60000,
        "state": TransactionState.ONGOING,
        "partitions": frozenset({TopicPartition("t", 0), TopicPartition("t", 1)}),
        "txn_start_timestamp": 1700000000000,
        "txn_last_update_timestamp": 1700000000123,
    }
    fields.update(overrides)
    return TxnTransit(**fields)  # type: ignore[arg-type]


def test_key_is_version_0_and_the_transactional_id() -> None:
    assert encode_key("tx").hex() == "0000" + "0002" + b"tx".hex()


def test_value_version_0_matches_kafkas_bytes() -> None:
    expected = (
        "0000"  # version
        "00000000000003e8"  # ProducerId 1000
        "0005"  # ProducerEpoch
        "0000ea60"  # TransactionTimeoutMs 60000
        "01"  # TransactionStatus Ongoing
        "00000001"
        "0001"
        "74"
        "00000002"
        "00000000"
        "00000001" + LAST_UPDATE + START  # [{t: [0, 1]}]
    )
    codec = TransactionRecordCodec(value_version=0)
    key, value = codec.encode(("tx", ongoing()))
    assert value is not None and value.hex() == expected
    assert codec.decode(key, bytes.fromhex(expected)) == ("tx", ongoing())


def test_value_version_1_carries_the_client_transaction_version_tag() -> None:
    # Kafka sets ClientTransactionVersion only; the producer id tags keep their defaults.
    transit = ongoing(prev_producer_id=999, next_producer_id=1001, client_transaction_version=2)
    expected = (
        "0001"
        "00000000000003e8"
        "0005"
        "0000ea60"
        "01"
        "02"
        "0274"
        "03"
        "00000000"
        "00000001"
        "00"  # compact [{t: [0, 1]}], no tags
        + LAST_UPDATE
        + START
        + "01"
        + "02"
        + "02"
        + "0002"  # one tagged field: tag 2, 2 bytes, version 2
    )
    codec = TransactionRecordCodec(value_version=1)
    _, value = codec.encode(("tx", transit))
    assert value is not None and value.hex() == expected
    assert decode_value(bytes.fromhex(expected)) == ongoing(client_transaction_version=2)


def test_the_producer_id_tags_are_read() -> None:
    tagged = (
        "0001"
        "00000000000003e8"
        "0005"
        "0000ea60"
        "01"
        "00"  # no partitions (null)
        + LAST_UPDATE
        + START
        + "02"
        + "00"
        + "08"
        + "00000000000003e7"
        + "01"
        + "08"
        + "00000000000003e9"
    )
    decoded = decode_value(bytes.fromhex(tagged))
    assert (decoded.prev_producer_id, decoded.next_producer_id) == (999, 1001)
    assert decoded.client_transaction_version == 0


@pytest.mark.parametrize(("version", "null_array"), [(0, "ffffffff"), (1, "00")])
def test_an_empty_transaction_writes_null_partitions(version: int, null_array: str) -> None:
    empty = ongoing(state=TransactionState.EMPTY, partitions=frozenset(), txn_start_timestamp=-1)
    _, value = TransactionRecordCodec(version).encode(("tx", empty))
    assert value is not None
    assert value.hex()[2 * (2 + 8 + 2 + 4 + 1) :].startswith(null_array)
    assert decode_value(value) == empty


def test_tombstones_unknown_keys_and_garbage() -> None:
    codec = TransactionRecordCodec()
    assert codec.decode(encode_key("tx"), None) == ("tx", None)
    assert codec.decode(bytes.fromhex("0001" + "0002" + b"tx".hex()), b"\x00\x00") is None
    with pytest.raises(ValueError, match="version"):
        codec.decode(encode_key("tx"), bytes.fromhex("0009"))
    with pytest.raises(ValueError, match="state id"):
        codec.decode(encode_key("tx"), bytes.fromhex("0000" + "00" * 8 + "0000" + "00" * 4 + "09"))
    with pytest.raises(ValueError):
        codec.decode(encode_key("tx"), bytes.fromhex("0000" + "00" * 5))
