"""Loopback ports for the processes tests start, collision-free across pytest-xdist workers.

Binding to port 0 and closing the socket hands out a port from the kernel's ephemeral range,
where another worker's bind(0), or any client connection's source port, may take it before
the broker binds it ("Address already in use"). Instead each worker walks its own slice of
the ports below the ephemeral range (32768 and up on Linux), and skips a port it cannot bind
now. Standard library only: benches/ uses tests/integration/cluster.py without pytest.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator

HOST = "127.0.0.1"
FIRST_PORT = 20000
# Below /proc/sys/net/ipv4/ip_local_port_range's default start (32768).
END_PORT = 32000
MAX_WORKERS = 8


def worker_slice(worker: str | None, workers: int) -> range:
    """The ports of xdist worker `worker` ("gw0", "gw1", ...; None when not under xdist)."""
    index = int(worker.removeprefix("gw")) if worker else 0
    size = (END_PORT - FIRST_PORT) // max(1, min(workers, MAX_WORKERS))
    start = FIRST_PORT + (index % MAX_WORKERS) * size
    return range(start, start + size)


_PORTS = worker_slice(
    os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
)
# A random start: two sessions at once (two checkouts on one machine) rarely meet.
_FIRST = random.randrange(len(_PORTS))
_next_ports: Iterator[int] = itertools.cycle([*_PORTS[_FIRST:], *_PORTS[:_FIRST]])


def bindable(port: int) -> bool:
    """Nothing listens on `port`, and no connection of it lingers in TIME_WAIT."""
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port no other test of this session has been given lately, and bindable now."""
    for port in itertools.islice(_next_ports, len(_PORTS)):
        if bindable(port):
            return port
    raise OSError(f"no bindable port in {_PORTS}")
