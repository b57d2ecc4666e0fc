"""Kafka's primitive encodings: big-endian ints, strings, bytes, and the compact (flexible) forms.

Just enough of the message wire format to read and write the coordinators' records
(`__consumer_offsets`, `__transaction_state`); the request/response messages themselves are kio's
job.
"""

from __future__ import annotations

import struct
from uuid import UUID


class RecordFormatError(ValueError):
    """The bytes do not follow the schema (truncated, negative length, bad UTF-8)."""


_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Writer:
    """Appends Kafka primitives to a byte buffer; `compact` selects the flexible-version forms."""

    def __init__(self, compact: bool = False) -> None:
        self.compact = compact
        self._buffer = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._buffer)

    def int8(self, value: int) -> None:
        self._buffer += _INT8.pack(value)

    def int16(self, value: int) -> None:
        self._buffer += _INT16.pack(value)

    def int32(self, value: int) -> None:
        self._buffer += _INT32.pack(value)

    def int64(self, value: int) -> None:
        self._buffer += _INT64.pack(value)

    def uvarint(self, value: int) -> None:
        while value > 0x7F:
            self._buffer.append((value & 0x7F) | 0x80)
            value >>= 7
        self._buffer.append(value)

    def _length(self, length: int | None) -> None:
        """A length prefix; None is the null marker (-1, or 0 in compact form)."""
        if self.compact:
            self.uvarint(0 if length is None else length + 1)
        else:
            self.int32(-1 if length is None else length)

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            if self.compact:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        self.string(value)

    def string(self, value: str) -> None:
        encoded = value.encode()
        if self.compact:
            self.uvarint(len(encoded) + 1)
        else:
            self.int16(len(encoded))
        self._buffer += encoded

    def bytes_field(self, value: bytes) -> None:
        self._length(len(value))
        self._buffer += value

    def uuid(self, value: UUID) -> None:
        self._buffer += value.bytes

    def array_length(self, length: int | None) -> None:
        """An array's length; None writes a null array."""
        self._length(length)

    def empty_tagged_fields(self) -> None:
        if self.compact:
            self.uvarint(0)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        """A flexible struct's tagged-field block: count, then (tag, size, data) by tag order."""
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(fields[tag]))
            self._buffer += fields[tag]


class Reader:
    """Reads Kafka primitives from a byte string; `compact` selects the flexible-version forms."""

    def __init__(self, data: bytes, compact: bool = False) -> None:
        self.compact = compact
        self._data = memoryview(data)
        self._position = 0

    def _take(self, size: int) -> memoryview:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise RecordFormatError(f"need {size} bytes at {self._position} of {len(self._data)}")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def int8(self) -> int:
        return int(_INT8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise RecordFormatError("unsigned varint longer than 5 bytes")

    def _length(self) -> int | None:
        length = self.uvarint() - 1 if self.compact else self.int32()
        return None if length < 0 else length

    def _string_length(self) -> int | None:
        length = self.uvarint() - 1 if self.compact else self.int16()
        return None if length < 0 else length

    def nullable_string(self) -> str | None:
        length = self._string_length()
        if length is None:
            return None
        try:
            return str(self._take(length), "utf-8")
        except UnicodeDecodeError as error:
            raise RecordFormatError(f"invalid UTF-8 in string: {error}") from error

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_field(self) -> bytes:
        value = self.nullable_bytes()
        if value is None:
            raise RecordFormatError("null where bytes are required")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self._length()
        return None if length is None else bytes(self._take(length))

    def uuid(self) -> UUID:
        return UUID(bytes=bytes(self._take(16)))

    def array_length(self) -> int:
        length = self._length()
        if length is None:
            raise RecordFormatError("null where an array is required")
        return length

    def nullable_array_length(self) -> int | None:
        return self._length()

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields by tag (empty for a non-flexible version)."""
        if not self.compact:
            return {}
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = bytes(self._take(self.uvarint()))
        return fields
