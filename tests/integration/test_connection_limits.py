"""Per-IP connection limits with a real broker: max.connections.per.ip and
max.connections.per.ip.overrides refuse the connection over the limit, and both change with
kafka-configs while the broker runs; a bad override is refused as Kafka refuses it."""

from __future__ import annotations

import socket
from contextlib import ExitStack
from typing import Any

from . import wire
from .kafka_cli import CONFIG_COMMAND, run_tool

HOST = "127.0.0.1"
# The test's connections come from their own loopback address, so the admin tool's own
# connections (from 127.0.0.1, closing as the tool exits) never count against them.
CLIENT = "127.0.0.2"


def served(stack: ExitStack, port: int) -> bool:
    """Open one more connection (kept open by `stack`): whether the broker answers on it."""
    sock = stack.enter_context(
        socket.create_connection((HOST, port), timeout=10, source_address=(CLIENT, 0))
    )
    try:
        return wire.api_versions(sock, 0, 1).error_code == 0
    except (wire.ConnectionClosedError, OSError):
        return False


def alter_cluster_default(broker: Any, config: str) -> Any:
    return run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        config,
    )


def test_per_ip_limits_and_their_overrides_change_without_restart(broker_factory: Any) -> None:
    broker = broker_factory({"max.connections.per.ip": "2"})
    with ExitStack() as stack:
        assert [served(stack, broker.port) for _ in range(3)] == [True, True, False]
    refused = alter_cluster_default(broker, "max.connections.per.ip.overrides=[bad/host:1]")
    assert refused.returncode != 0
    assert "contains invalid addresses : bad/host" in refused.stdout + refused.stderr
    done = alter_cluster_default(broker, f"max.connections.per.ip.overrides={CLIENT}:4")
    assert done.returncode == 0, done.stdout + done.stderr
    with ExitStack() as stack:
        assert [served(stack, broker.port) for _ in range(5)] == [True] * 4 + [False]
    done = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "max.connections.per.ip.overrides",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with ExitStack() as stack:
        assert [served(stack, broker.port) for _ in range(3)] == [True, True, False]
    # Last: the admin tool itself needs two connections.
    done = alter_cluster_default(broker, "max.connections.per.ip=1")
    assert done.returncode == 0, done.stdout + done.stderr
    with ExitStack() as stack:
        assert [served(stack, broker.port) for _ in range(2)] == [True, False]


def test_an_ip_over_its_connection_creation_rate_has_new_connections_closed(
    broker_factory: Any,
) -> None:
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    done = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--entity-type",
        "ips",
        "--entity-name",
        CLIENT,
        "--add-config",
        "connection_creation_rate=1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with ExitStack() as stack:
        # Two connections within a second are two per second: the second is closed.
        assert [served(stack, broker.port) for _ in range(2)] == [True, False]
        with wire.connect(HOST, broker.port) as other:
            assert wire.api_versions(other, 0, 1).error_code == 0
