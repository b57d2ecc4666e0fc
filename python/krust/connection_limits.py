"""max.connections.per.ip.overrides as Kafka parses and checks it (KafkaConfig: a csv map of
host:count, hosts of valid characters, counts that are ints; max.connections.per.ip may be 0
only with overrides), and the connection limits the core enforces, which change while the
broker runs (they are cluster-wide dynamic broker configs in Kafka)."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from typing import Any, Protocol

OVERRIDES_KEY = "max.connections.per.ip.overrides"
CONNECTION_LIMIT_KEYS = frozenset(
    {"max.connections", "max.connections.per.ip", OVERRIDES_KEY, "max.connection.creation.rate"}
)
# Kafka's Utils.validHostPattern.
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
log = logging.getLogger(__name__)


class ConnectionLimitsCore(Protocol):
    def set_connection_limits(
        self,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        max_creation_rate: int,
    ) -> None: ...


def parse_overrides(text: str) -> dict[str, int]:
    """host:count,... (Kafka's Csv.parseCsvMap: the count follows the last colon);
    ValueError with Kafka's reason."""
    overrides: dict[str, int] = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep:
            raise ValueError(f"Error parsing configuration property '{OVERRIDES_KEY}': {entry}")
        try:
            overrides[host.strip()] = int(count.strip())
        except ValueError:
            raise ValueError(
                f"Error parsing configuration property '{OVERRIDES_KEY}': "
                f'For input string: "{count.strip()}"'
            ) from None
    invalid = [host for host in overrides if not _VALID_HOST.fullmatch(host)]
    if invalid:
        raise ValueError(f"{OVERRIDES_KEY} contains invalid addresses : {','.join(invalid)}")
    return overrides


def overrides_problem(text: str) -> str | None:
    """The config table's check of max.connections.per.ip.overrides."""
    try:
        parse_overrides(text)
    except ValueError as error:
        return str(error)
    return None


def limits_problem(config: Mapping[str, Any]) -> str | None:
    """Kafka's rule across the keys: max.connections.per.ip may be 0 only with overrides."""
    if config["max.connections.per.ip"] == 0 and not parse_overrides(config[OVERRIDES_KEY]):
        return f"max.connections.per.ip can be set to zero only if {OVERRIDES_KEY} property is set."
    return None


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
