"""The Kafka wire protocol by hand, for tests that must send exactly the bytes they choose.

Only what the raw-socket tests and the readiness probe need: size-prefixed frames, request
headers v1/v2, ApiVersions (KIP-511 fallback), Metadata v1, Produce v3, Fetch v4 and
AllocateProducerIds v0.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_VERSIONS = 18
API_ALLOCATE_PRODUCER_IDS = 67

CLIENT_ID = "krust-tests"


class ConnectionClosedError(Exception):
    """The broker closed the connection instead of answering."""


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(value: str | None) -> bytes:
    if value is None:
        return int16(-1)
    encoded = value.encode()
    return int16(len(encoded)) + encoded


def compact_string(value: str) -> bytes:
    encoded = value.encode()
    return bytes([len(encoded) + 1]) + encoded  # unsigned varint; short strings fit in one byte


def sized(data: bytes) -> bytes:
    """A BYTES field: int32 length, then the bytes."""
    return int32(len(data)) + bytes(data)


def array(items: list[bytes]) -> bytes:
    return int32(len(items)) + b"".join(items)


def frame(payload: bytes) -> bytes:
    return sized(payload)


def request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str = CLIENT_ID
) -> bytes:
    """Request header v1 (non-flexible requests)."""
    return int16(api_key) + int16(api_version) + int32(correlation_id) + string(client_id)


def flexible_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str = CLIENT_ID
) -> bytes:
    """Request header v2: v1 plus an empty tagged-field section (KIP-482)."""
    return request_header(api_key, api_version, correlation_id, client_id) + b"\x00"


class Reader:
    """Reads big-endian fields from a response body."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        value = self._data[self._pos : self._pos + length].decode()
        self._pos += length
        return value


def connect(host: str, port: int, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionClosedError(f"connection closed after {len(chunks)} of {size} bytes")
        chunks += chunk
    return bytes(chunks)


def read_frame(sock: socket.socket) -> bytes:
    """Read one size-prefixed frame; returns it without its size."""
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return _recv_exactly(sock, size)


def read_response(sock: socket.socket, correlation_id: int) -> Reader:
    """Read one response frame, check its correlation id, return a reader after the v0 header."""
    reader = Reader(read_frame(sock))
    received_id = reader.int32()
    assert received_id == correlation_id, f"correlation id {received_id} != {correlation_id}"
    return reader


def is_closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True if the peer closes the connection within `timeout` without sending anything."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def metadata_broker_ports(host: str, port: int, timeout: float) -> list[int]:
    """Ports of the brokers a Metadata v1 request (for no topics) returns."""
    with connect(host, port, timeout) as sock:
        no_topics = int32(0)
        sock.sendall(frame(request_header(API_METADATA, 1, 1) + no_topics))
        reader = read_response(sock, 1)
        ports = []
        for _ in range(reader.int32()):
            reader.int32()  # node id
            reader.string()  # host
            ports.append(reader.int32())
            reader.string()  # rack
        return ports


@dataclass(frozen=True)
class ApiVersionsV0:
    error_code: int
    ranges: dict[int, tuple[int, int]]


def api_versions(sock: socket.socket, api_version: int, correlation_id: int) -> ApiVersionsV0:
    """Send ApiVersions at `api_version` (flexible from v3) and parse the reply as v0.

    The reply is v0-shaped both for v0 requests and, per KIP-511, for versions the broker
    does not support.
    """
    if api_version >= 3:
        header = flexible_request_header(API_VERSIONS, api_version, correlation_id)
        body = compact_string("krust-tests") + compact_string("1.0") + b"\x00"
    else:
        header = request_header(API_VERSIONS, api_version, correlation_id)
        body = b""
    sock.sendall(frame(header + body))
    reader = read_response(sock, correlation_id)
    error_code = reader.int16()
    ranges = {}
    for _ in range(reader.int32()):
        api_key = reader.int16()
        ranges[api_key] = (reader.int16(), reader.int16())
    return ApiVersionsV0(error_code, ranges)


@dataclass(frozen=True)
class PartitionProduceResult:
    error_code: int
    base_offset: int


def produce_v3(
    sock: socket.socket,
    topic: str,
    batches: dict[int, bytes],
    correlation_id: int,
) -> dict[int, PartitionProduceResult]:
    """Send one Produce v3 request (acks=all) with a batch per partition; results by partition."""
    partition_data = [int32(partition) + sized(batch) for partition, batch in batches.items()]
    body = string(None) + int16(-1) + int32(10_000) + array([string(topic) + array(partition_data)])
    sock.sendall(frame(request_header(API_PRODUCE, 3, correlation_id) + body))
    reader = read_response(sock, correlation_id)
    results = {}
    for _ in range(reader.int32()):
        reader.string()  # topic name
        for _ in range(reader.int32()):
            partition = reader.int32()
            error_code = reader.int16()
            base_offset = reader.int64()
            reader.int64()  # log append time
            results[partition] = PartitionProduceResult(error_code, base_offset)
    return results


def send_fetch_v4(
    sock: socket.socket,
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int,
    correlation_id: int,
) -> None:
    """Send one Fetch v4 (min_bytes 1) without waiting; read it with `read_response`."""
    partitions = array([int32(partition) + int64(offset) + int32(1 << 20)])
    topics = array([string(topic) + partitions])
    body = int32(-1) + int32(max_wait_ms) + int32(1) + int32(1 << 20) + b"\x00" + topics
    sock.sendall(frame(request_header(API_FETCH, 4, correlation_id) + body))


def send_allocate_producer_ids(
    sock: socket.socket, client_id: str, broker_id: int, correlation_id: int
) -> None:
    """Send AllocateProducerIds v0 (flexible), the controller-only API, as `client_id`."""
    header = flexible_request_header(API_ALLOCATE_PRODUCER_IDS, 0, correlation_id, client_id)
    body = int32(broker_id) + int64(-1) + b"\x00"
    sock.sendall(frame(header + body))


def record_batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int) -> bytes:
    """An uncompressed v2 RecordBatch of (key, value) records without producer id, built by
    kafka-python, CRC included."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, (key, value) in enumerate(records):
        builder.append(offset, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytes(builder.build())
