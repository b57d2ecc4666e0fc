"""The wire format of KIP-631 metadata records: the flexible-version encoding of Kafka's message
schemas (compact strings and arrays, KIP-482 tagged fields), for the record classes of
`krust.controller.records`.

Every metadata record is a flexible version, so this is the whole of it: big-endian integers,
compact (length + 1, 0 for null) strings, bytes and arrays, 16-byte uuids, and after a struct's
fields its tagged fields, each written only when it differs from its default, in tag order. It
encodes byte for byte as kio's serializer does (tests/unit/test_record_codec.py checks every
record class against it); it exists because the broker replays the metadata log before its port
opens, and kio's serializer module brings asyncio and the protocol's header classes with it,
about a fifth of an empty broker's start-up (docs/python-services.md, "Start-up order").
"""

from __future__ import annotations

import dataclasses
import struct
import types
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, Union, get_args, get_origin

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]

_ZERO_UUID = bytes(16)


class RecordFormatError(ValueError):
    """Bytes that are not a record of the expected class."""


def read_uvarint(data: bytes, offset: int) -> tuple[int, int]:
    """An unsigned varint (at most 32 bits) at `offset`: its value and its size."""
    value = shift = 0
    for index in range(offset, min(offset + 5, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1 - offset
        shift += 7
    raise RecordFormatError("truncated or oversized unsigned varint")


def write_uvarint(buffer: bytearray, value: int) -> None:
    while value >= 0x80:
        buffer.append((value & 0x7F) | 0x80)
        value >>= 7
    buffer.append(value)


def _fixed(fmt: str) -> tuple[Reader, Writer]:
    layout = struct.Struct(fmt)

    def read(data: bytes, offset: int) -> tuple[Any, int]:
        if offset + layout.size > len(data):
            raise RecordFormatError(f"truncated {fmt} at byte {offset}")
        return layout.unpack_from(data, offset)[0], layout.size

    def write(buffer: bytearray, value: Any) -> None:
        buffer += layout.pack(value)

    return read, write


def _read_bool(data: bytes, offset: int) -> tuple[bool, int]:
    if offset >= len(data) or data[offset] > 1:
        raise RecordFormatError(f"bad boolean at byte {offset}")
    return data[offset] == 1, 1


def _write_bool(buffer: bytearray, value: bool) -> None:
    buffer.append(1 if value else 0)


def _read_uuid(data: bytes, offset: int) -> tuple[uuid.UUID | None, int]:
    raw = data[offset : offset + 16]
    if len(raw) != 16:
        raise RecordFormatError(f"truncated uuid at byte {offset}")
    # kio reads the zero uuid (Kafka's Uuid.ZERO_UUID) as None.
    return (None if raw == _ZERO_UUID else uuid.UUID(bytes=raw)), 16


def _write_uuid(buffer: bytearray, value: uuid.UUID | None) -> None:
    buffer += _ZERO_UUID if value is None else value.bytes


def _read_compact_bytes(data: bytes, offset: int) -> tuple[bytes | None, int]:
    length, size = read_uvarint(data, offset)
    if length == 0:
        return None, size
    start, end = offset + size, offset + size + length - 1
    if end > len(data):
        raise RecordFormatError(f"truncated bytes at byte {offset}")
    return data[start:end], size + length - 1


def _write_compact_bytes(buffer: bytearray, value: bytes | None) -> None:
    if value is None:
        buffer.append(0)
        return
    write_uvarint(buffer, len(value) + 1)
    buffer += value


def _read_compact_string(data: bytes, offset: int) -> tuple[str | None, int]:
    raw, size = _read_compact_bytes(data, offset)
    if raw is None:
        return None, size
    try:
        return raw.decode(), size
    except UnicodeDecodeError:
        raise RecordFormatError(f"string at byte {offset} is not UTF-8") from None


def _write_compact_string(buffer: bytearray, value: str | None) -> None:
    _write_compact_bytes(buffer, None if value is None else value.encode())


_PRIMITIVES: dict[str, tuple[Reader, Writer]] = {
    "int8": _fixed(">b"),
    "int16": _fixed(">h"),
    "int32": _fixed(">i"),
    "int64": _fixed(">q"),
    "uint16": _fixed(">H"),
    "float64": _fixed(">d"),
    "bool": (_read_bool, _write_bool),
    "uuid": (_read_uuid, _write_uuid),
    "string": (_read_compact_string, _write_compact_string),
    "bytes": (_read_compact_bytes, _write_compact_bytes),
}


def _array(read_item: Reader, write_item: Writer) -> tuple[Reader, Writer]:
    def read(data: bytes, offset: int) -> tuple[tuple[Any, ...] | None, int]:
        length, position = read_uvarint(data, offset)
        if length == 0:
            return None, position
        if length - 1 > len(data) - offset - position:
            raise RecordFormatError(f"array at byte {offset} claims {length - 1} items")
        items = []
        for _ in range(length - 1):
            item, size = read_item(data, offset + position)
            items.append(item)
            position += size
        return tuple(items), position

    def write(buffer: bytearray, items: tuple[Any, ...] | None) -> None:
        if items is None:
            buffer.append(0)
            return
        write_uvarint(buffer, len(items) + 1)
        for item in items:
            write_item(buffer, item)

    return read, write


class _Field(NamedTuple):
    # A NamedTuple, not a dataclass: this module loads before the port opens.
    name: str
    read: Reader
    write: Writer
    tag: int  # -1: not a tagged field
    default: Any


def _field_codec(field: dataclasses.Field[Any]) -> tuple[Reader, Writer]:
    """The reader and writer of one field, from its annotation and its `kafka_type`."""
    annotation: Any = field.type
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = (arg for arg in get_args(annotation) if arg is not type(None))
    if get_origin(annotation) is tuple:
        item = get_args(annotation)[0]
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            codec = _struct_codec(item)
            return _array(codec.read, codec.write)
        return _array(*_PRIMITIVES[field.metadata["kafka_type"]])
    return _PRIMITIVES[field.metadata["kafka_type"]]


class StructCodec:
    """Reads and writes one record (or nested struct) class."""

    def __init__(self, cls: type[Any]) -> None:
        self._cls = cls
        self._fields: list[_Field] = []
        tagged: list[_Field] = []
        for field in dataclasses.fields(cls):
            read, write = _field_codec(field)
            tag = field.metadata.get("tag", -1)
            if tag >= 0 and field.default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{field.name}: a tagged field needs a default")
            (tagged if tag >= 0 else self._fields).append(
                _Field(field.name, read, write, tag, field.default)
            )
        self._tagged = sorted(tagged, key=lambda field: field.tag)
        self._by_tag = {field.tag: field for field in self._tagged}

    def read(self, data: bytes, offset: int) -> tuple[Any, int]:
        """The struct at `offset` and its size; unknown tagged fields are skipped."""
        values: dict[str, Any] = {}
        position = offset
        for field in self._fields:
            values[field.name], size = field.read(data, position)
            position += size
        count, size = read_uvarint(data, position)
        position += size
        for _ in range(count):
            tag, size = read_uvarint(data, position)
            position += size
            length, size = read_uvarint(data, position)
            position += size
            end = position + length
            if end > len(data):
                raise RecordFormatError(f"tagged field {tag} runs past the end")
            tagged = self._by_tag.get(tag)
            if tagged is not None:
                values[tagged.name], size = tagged.read(data[position:end], 0)
                if size != length:
                    raise RecordFormatError(f"tagged field {tag} is {length} bytes, read {size}")
            position = end
        try:
            return self._cls(**values), position - offset
        except (TypeError, ValueError) as error:
            raise RecordFormatError(f"missing or bad fields: {error}") from None

    def write(self, buffer: bytearray, entity: Any) -> None:
        for field in self._fields:
            field.write(buffer, getattr(entity, field.name))
        present = [
            (field, value)
            for field in self._tagged
            if (value := getattr(entity, field.name)) != field.default
        ]
        write_uvarint(buffer, len(present))
        for field, value in present:
            body = bytearray()
            field.write(body, value)
            write_uvarint(buffer, field.tag)
            write_uvarint(buffer, len(body))
            buffer += body


_CODECS: dict[type[Any], StructCodec] = {}


def _struct_codec(cls: type[Any]) -> StructCodec:
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = StructCodec(cls)
    return codec


def read_struct(cls: type[Any], data: bytes, offset: int) -> tuple[Any, int]:
    """An instance of the dataclass `cls` decoded at `offset`, and its size in bytes."""
    return _struct_codec(cls).read(data, offset)


def write_struct(buffer: bytearray, entity: Any) -> None:
    """Append the encoding of a record (or nested struct) dataclass instance to `buffer`."""
    _struct_codec(type(entity)).write(buffer, entity)
