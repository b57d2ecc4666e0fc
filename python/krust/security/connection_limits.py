"""The connection limits the core enforces (max.connections, max.connections.per.ip and its
overrides, max.connection.creation.rate), which change while the broker runs (they are
cluster-wide dynamic broker configs in Kafka); krust.config.checks parses and checks them."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any

from krust.bridge.core import ConnectionLimitsCore
from krust.config.checks import OVERRIDES_KEY, parse_overrides

CONNECTION_LIMIT_KEYS = frozenset(
    {"max.connections", "max.connections.per.ip", OVERRIDES_KEY, "max.connection.creation.rate"}
)
log = logging.getLogger(__name__)


def _address(host: str) -> str | None:
    try:
        return str(socket.getaddrinfo(host, None)[0][4][0])
    except (OSError, UnicodeError):
        return None


def push_connection_limits(core: ConnectionLimitsCore, config: Mapping[str, Any]) -> None:
    """Hand the core the connection limits in force, override hosts resolved to addresses
    (as Kafka's InetAddress.getByName); a host that does not resolve is logged and skipped."""
    overrides = {}
    for host, count in parse_overrides(config[OVERRIDES_KEY]).items():
        address = _address(host)
        if address is None:
            log.warning("%s: cannot resolve %s; its override is not applied", OVERRIDES_KEY, host)
        else:
            overrides[address] = count
    core.set_connection_limits(
        config["max.connections"],
        config["max.connections.per.ip"],
        overrides,
        config["max.connection.creation.rate"],
    )
