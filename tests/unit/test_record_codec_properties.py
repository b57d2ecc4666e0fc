"""Properties of the KIP-631 metadata record codec (krust.controller.record_codec, .records) for
every record class, with generated field values: null, empty, unicode and large ones.

- decode(encode(r)) == r, and the encoding is canonical: encode(decode(b)) == b for b = encode(r);
- every strict prefix of an encoding, and any trailing byte, is refused;
- forged lengths, flipped bytes and arbitrary bytes are refused with MetadataRecordError (or
  decode to a record whose encoding reads back the same), never another exception.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import typing
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from krust.controller.record_codec import RecordFormatError, read_struct
from krust.controller.records import (
    RECORD_TYPES,
    ConfigRecord,
    MetadataRecordError,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)

# Short values mostly, sometimes one long enough for a two-byte length varint (>= 128 bytes;
# test_values_with_a_three_byte_length_round_trip goes past 16384); characters of any plane,
# never a lone surrogate (not encodable as UTF-8).
_TEXT = st.one_of(
    st.text(max_size=12),
    st.builds(
        lambda char, count: char * count, st.characters(codec="utf-8"), st.integers(100, 300)
    ),
)
_BYTES = st.one_of(
    st.binary(max_size=12),
    st.builds(
        lambda byte, count: bytes([byte]) * count, st.integers(0, 255), st.integers(100, 300)
    ),
)
_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    # Kafka's zero uuid reads as None (kio's convention), so a set uuid is never zero.
    "uuid": st.integers(1, 2**128 - 1).map(lambda value: uuid.UUID(int=value)),
    "string": _TEXT,
    "bytes": _BYTES,
}


def _field_strategy(annotation: Any, kafka_type: str | None) -> st.SearchStrategy[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (inner,) = (arg for arg in typing.get_args(annotation) if arg is not type(None))
        return st.none() | _field_strategy(inner, kafka_type)
    if typing.get_origin(annotation) is tuple:
        item = typing.get_args(annotation)[0]
        items = (
            _struct_strategy(item)
            if dataclasses.is_dataclass(item)
            else _PRIMITIVES[typing.cast(str, kafka_type)]
        )
        return st.lists(items, max_size=4).map(tuple)
    return _PRIMITIVES[typing.cast(str, kafka_type)]


@functools.cache
def _struct_strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    return st.builds(
        cls,
        **{
            field.name: _field_strategy(hints[field.name], field.metadata.get("kafka_type"))
            for field in dataclasses.fields(cls)
        },
    )


_CLASSES = sorted(RECORD_TYPES.values(), key=lambda cls: cls.__name__)
RECORDS = st.one_of([_struct_strategy(cls) for cls in _CLASSES])


@pytest.mark.parametrize("record_type", _CLASSES, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_every_record_class_round_trips(record_type: type[Any], data: st.DataObject) -> None:
    record = data.draw(_struct_strategy(record_type))
    encoded = encode_record(record)
    decoded = decode_record(encoded)
    assert decoded == record
    assert encode_record(decoded) == encoded


@settings(max_examples=5)
@given(st.integers(2**14, 2**17), st.characters(codec="utf-8"))
def test_values_with_a_three_byte_length_round_trip(size: int, char: str) -> None:
    records = [
        ConfigRecord(resource_type=2, resource_name="t", name="k", value=char * size),
        UserScramCredentialRecord(
            name=char, mechanism=1, salt=bytes(size), stored_key=b"", server_key=b"", iterations=1
        ),
    ]
    for record in records:
        assert decode_record(encode_record(record)) == record


@given(RECORDS, st.integers(0, 2**16))
def test_a_truncated_record_is_refused(record: Any, cut: int) -> None:
    encoded = encode_record(record)
    cut %= len(encoded)
    with pytest.raises(MetadataRecordError):
        decode_record(encoded[:cut])


@given(RECORDS, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_are_refused(record: Any, tail: bytes) -> None:
    with pytest.raises(MetadataRecordError, match="trailing"):
        decode_record(encode_record(record) + tail)


# A varint claiming far more than any buffer holds, and a few byte values that are lengths,
# null markers and continuation bits.
_FORGED = st.sampled_from(
    [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x01", b"\xff", b"\x00", b"\x01", b"\x7f", b"\x80"]
)


def _decodes_canonically_or_is_refused(value: bytes) -> None:
    """Either MetadataRecordError, or a record whose encoding decodes to the same encoding."""
    try:
        record = decode_record(value)
    except MetadataRecordError:
        return
    canonical = encode_record(record)
    assert encode_record(decode_record(canonical)) == canonical


@given(
    RECORDS,
    st.sampled_from(["replace", "insert", "flip"]),
    st.integers(0, 2**16),
    _FORGED,
    st.integers(1, 255),
)
def test_forged_lengths_and_flipped_bytes_are_refused_or_read(
    record: Any, how: str, position: int, forged: bytes, mask: int
) -> None:
    encoded = encode_record(record)
    position %= len(encoded)
    if how == "flip":
        mutated = bytearray(encoded)
        mutated[position] ^= mask
        value = bytes(mutated)
    else:
        end = position + (len(forged) if how == "replace" else 0)
        value = encoded[:position] + forged + encoded[end:]
    _decodes_canonically_or_is_refused(value)


@given(st.sampled_from(sorted(RECORD_TYPES)), st.binary(max_size=64))
def test_arbitrary_bodies_are_refused_or_read(
    api_key_version: tuple[int, int], body: bytes
) -> None:
    """A valid frame (version 1, a known api key and version; all three fit one varint byte)
    around any bytes."""
    api_key, version = api_key_version
    _decodes_canonically_or_is_refused(bytes([1, api_key, version]) + body)


@given(st.sampled_from(_CLASSES), st.binary(max_size=48))
def test_a_struct_reader_raises_only_its_format_error(record_type: type[Any], value: bytes) -> None:
    """read_struct, under the framing, on any bytes: a record or RecordFormatError."""
    with contextlib.suppress(RecordFormatError):
        read_struct(record_type, value, 0)
