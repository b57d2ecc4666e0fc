"""Sockets that send a size and then stall, and requests that park, do not take the broker's
request slots from other clients; a stalled partial frame costs only the bytes it sent and is
dropped after connections.max.idle.ms (as Kafka's idle connection expiry)."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import wire
from .broker_process import HOST
from .clients import CLIENTS_BY_NAME, consume_all
from .clients.confluent import create_topic
from .records import Record, now_ms

STALLED_CONNECTIONS = 1000
CLAIMED_SIZE = 100 << 20  # each stalled connection claims 100 MiB and sends one byte
# The old core reserved the claimed size of every frame holding a request slot: 500 x 100 MiB.
MAX_VIRTUAL_GROWTH = 8 << 30
# Shorter than the parked fetch's max wait: an answer within it means the fetch did not block.
OTHER_CLIENT_TIMEOUT_S = 15.0
PARKED_FETCH_MAX_WAIT_MS = 30_000
confluent = CLIENTS_BY_NAME["confluent-kafka"]


@pytest.fixture
def many_open_files() -> Iterator[None]:
    """This process holds a socket per stalled connection: raise the soft limit for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = STALLED_CONNECTIONS + 512
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the open file limit ({hard}) is below {needed}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def virtual_memory_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/<pid>/status")


def stall(port: int) -> socket.socket:
    """A connection that sends a frame size and one byte of the frame, then nothing."""
    sock = socket.create_connection((HOST, port), timeout=10)
    sock.sendall(wire.int32(CLAIMED_SIZE) + b"x")
    return sock


def produce_and_consume(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic)
    record = Record(b"key", b"served despite stalled sockets", (), now_ms())
    confluent.produce(bootstrap, topic, 0, [record], "none")
    consumed = consume_all(confluent, bootstrap, topic, 1)
    assert [(c.offset, c.record) for c in consumed] == [(0, record)]


def test_stalled_partial_frames_neither_block_clients_nor_reserve_their_size(
    broker_factory, many_open_files
) -> None:
    broker = broker_factory()
    before = virtual_memory_bytes(broker.pid)
    stalled = [stall(broker.port) for _ in range(STALLED_CONNECTIONS)]
    try:
        produce_and_consume(broker.bootstrap, "next-to-stalled-sockets")
        grown = virtual_memory_bytes(broker.pid) - before
        assert grown < MAX_VIRTUAL_GROWTH, f"the broker reserved {grown >> 20} MiB"
    finally:
        for sock in stalled:
            sock.close()
    assert broker.running


def test_a_stalled_partial_frame_is_closed_after_connections_max_idle_ms(broker_factory) -> None:
    broker = broker_factory({"connections.max.idle.ms": "500"})
    with stall(broker.port) as sock:
        assert wire.is_closed_by_peer(sock, timeout=30), "the stalled connection stayed open"


def test_a_long_poll_fetch_does_not_hold_a_request_slot(broker_factory) -> None:
    broker = broker_factory({"queued.max.requests": "1"})
    create_topic(broker.bootstrap, "parked")
    with wire.connect(HOST, broker.port, timeout=60) as fetcher:
        wire.send_fetch_v4(fetcher, "parked", 0, 0, PARKED_FETCH_MAX_WAIT_MS, correlation_id=1)
        # Let the broker read the fetch first; if it has not yet, the test passes trivially
        # rather than failing.
        time.sleep(0.5)
        with wire.connect(HOST, broker.port, timeout=OTHER_CLIENT_TIMEOUT_S) as other:
            batch = wire.record_batch([(None, b"wakes the fetch")], now_ms())
            results = wire.produce_v3(other, "parked", {0: batch}, correlation_id=1)
        assert results[0].error_code == 0
        # The produce woke the fetch, which now answers with the record.
        reader = wire.read_response(fetcher, 1)
        reader.int32()  # throttle time
        assert reader.int32() == 1  # one topic
        assert reader.string() == "parked"
