"""krust's metadata record codec against kio's serializer: the same bytes for every record class,
with every field (tagged ones too) at a value other than its default, and at its defaults."""

from __future__ import annotations

import dataclasses
import io
import typing
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from krust.controller.record_codec import RecordFormatError, read_struct, write_struct
from krust.controller.records import RECORD_TYPES

_VALUES: dict[str, Any] = {
    "int8": 7,
    "int16": 300,
    "int32": 70_000,
    "int64": 5_000_000_000,
    "uint16": 65_000,
    "float64": 1.5,
    "bool": True,
    "uuid": uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
    "string": "krust-ü",
    "bytes": b"\x00\x01\xff",
}


def _value(field: dataclasses.Field[Any], owner: type[Any]) -> Any:
    """A value for `field` that differs from its default."""
    annotation = typing.get_type_hints(owner)[field.name]
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) is not tuple and len(args) == 1:
        annotation = args[0]
    if typing.get_origin(annotation) is tuple:
        (item, _) = typing.get_args(annotation)
        if dataclasses.is_dataclass(item):
            return (_instance(item), _instance(item))
        return (_VALUES[field.metadata["kafka_type"]],) * 2
    return _VALUES[field.metadata["kafka_type"]]


def _instance(cls: type[Any]) -> Any:
    return cls(**{field.name: _value(field, cls) for field in dataclasses.fields(cls)})


def _with_defaults(cls: type[Any]) -> Any:
    values = {
        field.name: _value(field, cls)
        for field in dataclasses.fields(cls)
        if field.default is dataclasses.MISSING
    }
    return cls(**values)


def _nested(cls: type[Any]) -> set[type[Any]]:
    found = set()
    for field in dataclasses.fields(cls):
        for arg in typing.get_args(typing.get_type_hints(cls)[field.name]):
            if dataclasses.is_dataclass(arg):
                found.add(arg)
    return found


@pytest.fixture(autouse=True)
def kio_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    """kio's serializer needs its entity markers on the classes (every record is flexible)."""
    for record_type in RECORD_TYPES.values():
        monkeypatch.setattr(record_type, "__type__", EntityType.data, raising=False)
        monkeypatch.setattr(record_type, "__flexible__", True, raising=False)
        for nested in _nested(record_type):
            monkeypatch.setattr(nested, "__type__", EntityType.nested, raising=False)
            monkeypatch.setattr(nested, "__flexible__", True, raising=False)


def _kio_bytes(record: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(record))(buffer, record)
    return buffer.getvalue()


@pytest.mark.parametrize("make", [_instance, _with_defaults], ids=["set", "defaults"])
@pytest.mark.parametrize("record_type", RECORD_TYPES.values(), ids=lambda cls: cls.__name__)
def test_every_record_encodes_as_kio_does_and_decodes_back(
    record_type: type[Any], make: Any
) -> None:
    record = make(record_type)
    ours = bytearray()
    write_struct(ours, record)

    assert bytes(ours) == _kio_bytes(record)
    assert read_struct(record_type, bytes(ours), 0) == (record, len(ours))
    assert entity_reader(record_type)(bytes(ours), 0) == (record, len(ours))


def test_unknown_tagged_fields_are_skipped() -> None:
    (record_type,) = (cls for cls in RECORD_TYPES.values() if cls.__name__ == "NoOpRecord")
    # No fields, then one tagged field (tag 9, 2 bytes) a later version might add.
    assert read_struct(record_type, bytes([1, 9, 2, 0xAB, 0xCD]), 0) == (record_type(), 5)


@pytest.mark.parametrize(
    "value",
    [
        bytes([0x05, 0x66]),  # a 4-byte string with 1 byte left
        bytes([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),  # a varint past 32 bits
        bytes([0x04, 0x66, 0x6F, 0x6F]),  # then no uuid
    ],
)
def test_truncated_or_forged_lengths_are_refused(value: bytes) -> None:
    (record_type,) = (cls for cls in RECORD_TYPES.values() if cls.__name__ == "TopicRecord")
    with pytest.raises(RecordFormatError):
        read_struct(record_type, value, 0)


def test_a_forged_array_count_is_refused_before_reading() -> None:
    (record_type,) = (cls for cls in RECORD_TYPES.values() if cls.__name__ == "PartitionRecord")
    # partition id, topic id, then replicas claiming 2**28 items.
    value = bytes(4) + bytes(16) + bytes([0x80, 0x80, 0x80, 0x80, 0x01])
    with pytest.raises(RecordFormatError, match="claims"):
        read_struct(record_type, value, 0)
