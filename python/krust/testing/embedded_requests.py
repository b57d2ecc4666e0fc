"""The two requests `krust.Broker` sends its child broker, Metadata and CreateTopics, built and
read with kio over a plain socket: no Kafka client library is needed to start a broker or to
create a topic on it."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.primitive import i16, i32

from krust.bridge.protocol import build_entity, encode_entity

API_METADATA = 3
API_CREATE_TOPICS = 19
# Versions every broker since Kafka 2.4 serves; Kafka 4 still serves both.
METADATA_VERSION = 9
CREATE_TOPICS_VERSION = 5
CLIENT_ID = "krust-embedded"
POLL_INTERVAL_S = 0.01


class RequestError(Exception):
    """The broker answered a request with an error."""


def send(
    address: tuple[str, int], api_key: int, version: int, fields: Mapping[str, Any], timeout: float
) -> Any:
    """The decoded response to one request (fields as `krust.bridge.protocol.build_entity`
    takes them) on a connection of its own."""
    request_type = load_request_schema(api_key, version)
    header = request_type.__header_schema__(
        request_api_key=i16(api_key),
        request_api_version=i16(version),
        correlation_id=i32(1),
        client_id=CLIENT_ID,
    )
    payload = encode_entity(header) + encode_entity(build_entity(request_type, fields))
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _receive(sock, 4))
        frame = _receive(sock, size)
    response_type = load_response_schema(api_key, version)
    _, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    return entity_reader(response_type)(frame, offset)[0]


def _receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def metadata_answers(address: tuple[str, int], cluster_id: str, timeout: float) -> bool:
    """True once the broker of that cluster answers Metadata listing itself (what clients
    need to start)."""
    try:
        response = send(address, API_METADATA, METADATA_VERSION, {"topics": []}, timeout)
    except (OSError, struct.error, ValueError):
        return False
    return response.cluster_id == cluster_id and len(response.brokers) > 0


def create_topic(
    address: tuple[str, int],
    name: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str],
    timeout: float,
) -> None:
    """CreateTopics, then wait until Metadata shows every partition with a leader."""
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "configs": [{"name": key, "value": value} for key, value in config.items()],
    }
    request = {"topics": [topic], "timeout": int(timeout * 1000)}
    response = send(address, API_CREATE_TOPICS, CREATE_TOPICS_VERSION, request, timeout)
    (result,) = response.topics
    if result.error_code != ErrorCode.none:
        raise RequestError(
            f"CreateTopics {name!r}: {result.error_code.name.upper()}: {result.error_message}"
        )
    deadline = time.monotonic() + timeout
    while not _has_leaders(address, name, partitions, timeout):
        if time.monotonic() > deadline:
            raise RequestError(
                f"topic {name!r} has no leader for every partition after {timeout} s"
            )
        time.sleep(POLL_INTERVAL_S)


def _has_leaders(address: tuple[str, int], name: str, partitions: int, timeout: float) -> bool:
    request = {"topics": [{"name": name}], "allow_auto_topic_creation": False}
    response = send(address, API_METADATA, METADATA_VERSION, request, timeout)
    (topic,) = response.topics
    return (
        topic.error_code == ErrorCode.none
        and len(topic.partitions) == partitions
        and all(partition.leader_id >= 0 for partition in topic.partitions)
    )
