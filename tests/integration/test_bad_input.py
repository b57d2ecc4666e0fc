"""Malformed bytes on the wire never take the broker down, and get Kafka's answer.

Each test abuses a raw socket, then checks that a real client still produces and consumes
through the same broker process.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest

from . import wire
from .broker_process import BrokerProcess, shared_broker
from .clients import CLIENTS_BY_NAME, consume_all
from .clients.confluent import create_topic, watermarks
from .records import Record, now_ms

SOCKET_REQUEST_MAX_BYTES = 1 << 20
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
CLOSE_TIMEOUT_S = 5.0
confluent = CLIENTS_BY_NAME["confluent-kafka"]
_probe_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module: each test checks it still serves after its abuse (a probe
    topic of its own), and a broker that died fails the test that killed it and the module."""
    overrides = {"socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES)}
    yield from shared_broker(tmp_path_factory.mktemp("bad-input-broker"), overrides)


def assert_still_serves_clients(broker) -> None:
    assert broker.running, "the broker process died"
    topic = f"still-alive-{next(_probe_topics)}"
    create_topic(broker.bootstrap, topic)
    record = Record(b"probe-key", b"probe value", (("after", b"abuse"),), now_ms())
    confluent.produce(broker.bootstrap, topic, 0, [record], "none")
    consumed = consume_all(confluent, broker.bootstrap, topic, 1)
    assert [(c.offset, c.record) for c in consumed] == [(0, record)]


def connect(broker):
    return wire.connect("127.0.0.1", broker.port)


def record_batch(values: list[bytes]) -> bytearray:
    """An uncompressed v2 RecordBatch of these values, as bytes a test may damage."""
    return bytearray(wire.record_batch([(None, value) for value in values], now_ms()))


def test_random_bytes_do_not_hurt_the_broker(broker) -> None:
    rng = random.Random(20_511)
    for _ in range(20):
        with connect(broker) as sock:
            sock.sendall(rng.randbytes(rng.randint(1, 4096)))
    for _ in range(20):
        with connect(broker) as sock:
            sock.sendall(wire.frame(rng.randbytes(rng.randint(1, 4096))))

    assert_still_serves_clients(broker)


def test_truncated_frame_then_close(broker) -> None:
    header = wire.request_header(wire.API_METADATA, 1, correlation_id=1)
    with connect(broker) as sock:
        sock.sendall(wire.int32(len(header) + 100) + header)
    with connect(broker) as sock:
        sock.sendall(wire.int32(500)[:3])

    assert_still_serves_clients(broker)


@pytest.mark.parametrize("size", [SOCKET_REQUEST_MAX_BYTES + 1, 2**31 - 1, -5])
def test_bad_length_prefix_closes_the_connection(broker, size: int) -> None:
    with connect(broker) as sock:
        sock.sendall(wire.int32(size) + b"\x00" * 64)

        assert wire.is_closed_by_peer(sock, CLOSE_TIMEOUT_S)

    assert_still_serves_clients(broker)


def test_unknown_api_key_closes_the_connection(broker) -> None:
    with connect(broker) as sock:
        sock.sendall(
            wire.frame(wire.request_header(api_key=32_000, api_version=0, correlation_id=7))
        )

        assert wire.is_closed_by_peer(sock, CLOSE_TIMEOUT_S)

    assert_still_serves_clients(broker)


def test_unsupported_api_versions_version_gets_the_v0_fallback(broker) -> None:
    with connect(broker) as sock:
        fallback = wire.api_versions(sock, api_version=99, correlation_id=11)

        assert fallback.error_code == UNSUPPORTED_VERSION
        low, high = fallback.ranges[wire.API_VERSIONS]
        assert low == 0 and high >= 3
        # KIP-511: the client retries on the same connection with a version both support.
        retried = wire.api_versions(sock, api_version=0, correlation_id=12)

    assert retried.error_code == 0
    for api_key in (wire.API_PRODUCE, wire.API_METADATA, wire.API_VERSIONS):
        assert api_key in retried.ranges
    assert_still_serves_clients(broker)


def test_corrupt_batch_is_rejected_while_another_partition_succeeds(broker) -> None:
    create_topic(broker.bootstrap, "half-corrupt", partitions=2)
    good = record_batch([b"intact value"])
    corrupt = record_batch([b"value damaged in transit"])
    corrupt[-3] ^= 0xFF  # inside the record's value, after the CRC was computed

    with connect(broker) as sock:
        results = wire.produce_v3(sock, "half-corrupt", {0: corrupt, 1: good}, correlation_id=21)

    assert results[0].error_code == CORRUPT_MESSAGE
    assert (results[1].error_code, results[1].base_offset) == (0, 0)
    assert watermarks(broker.bootstrap, "half-corrupt", 0) == (0, 0)
    stored = confluent.consume(broker.bootstrap, "half-corrupt", 1, 1, timeout_s=30)
    assert [c.record.value for c in stored] == [b"intact value"]
    assert_still_serves_clients(broker)
