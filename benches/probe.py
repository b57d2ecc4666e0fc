"""A bare Metadata request over TCP: the start-up clock stops at the first good answer.

A client library would add its own reconnect back-off to the measurement, so the probe
speaks the wire protocol itself. Metadata v4 is the oldest version Kafka 4 still serves
(KIP-896 removed v0-v3) and is not yet a flexible version, so the framing stays simple.
"""

from __future__ import annotations

import socket
import struct
import time

_METADATA_API_KEY = 3
_METADATA_VERSION = 4
_CLIENT_ID = b"krust-bench"


def _metadata_request(correlation_id: int) -> bytes:
    header = (
        struct.pack(">hhih", _METADATA_API_KEY, _METADATA_VERSION, correlation_id, len(_CLIENT_ID))
        + _CLIENT_ID
    )
    # topics: null array (all topics); allow_auto_topic_creation: false
    body = struct.pack(">i?", -1, False)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def metadata_answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when the broker answers Metadata listing at least one broker."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(_metadata_request(correlation_id=1))
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            response = _read_exactly(sock, size)
    except OSError:
        return False
    # correlation_id (4), throttle_time_ms (4), then the brokers array length.
    (correlation_id, _throttle, broker_count) = struct.unpack(">iii", response[:12])
    return correlation_id == 1 and broker_count > 0


def wait_for_metadata(host: str, port: int, deadline_s: float) -> float:
    """Poll until Metadata answers; return the monotonic time of the first good answer."""
    give_up = time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        if metadata_answers(host, port):
            return time.monotonic()
        time.sleep(0.005)
    raise TimeoutError(f"no Metadata answer from {host}:{port} within {deadline_s:.0f}s")
