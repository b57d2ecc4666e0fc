"""The config table's named checks: what bounds and choices cannot say about a value (a Kafka
uuid, the quorum's voters, max.connections.per.ip.overrides as Kafka parses it, ...)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any

from krust.config.roles import VOTER

OVERRIDES_KEY = "max.connections.per.ip.overrides"
# Kafka's Utils.validHostPattern.
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")

Validator = Callable[[Any], str | None]
"""Returns why a parsed value is invalid, or None when it is fine."""


def _valid_uuid(value: str) -> str | None:
    try:
        decoded = base64.urlsafe_b64decode(value + "==")
    except ValueError:
        decoded = b""
    if len(value) != 22 or len(decoded) != 16:
        return "expected a Kafka uuid: 16 bytes in url-safe base64 (22 characters)"
    return None


def _valid_voters(voters: list[str]) -> str | None:
    bad = [voter for voter in voters if not VOTER.fullmatch(voter)]
    return f"{', '.join(bad)}: expected id@host:port" if bad else None


def _gzip_level(level: int) -> str | None:
    return None if level == -1 or 1 <= level <= 9 else "value must be -1 or in [1, 9]"


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(replicas: list[str]) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or entries partition:broker (empty ones
    allowed)."""
    items = [item.strip() for item in replicas]
    if "".join(items) == "*" or all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _ip_overrides(text: str) -> str | None:
    return overrides_problem(text)


# The table's named checks: what bounds and choices cannot say.
CHECKS: Mapping[str, Validator] = {
    "uuid": _valid_uuid,
    "voters": _valid_voters,
    "gzip_level": _gzip_level,
    "throttled_replicas": _throttled_replicas,
    "ip_overrides": _ip_overrides,
}


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


def consumer_group_problem(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """Kafka's GroupCoordinatorConfig checks of the consumer group timeouts: (key, problem)."""
    for name in ("session.timeout.ms", "heartbeat.interval.ms"):
        key = f"group.consumer.{name}"
        low = values[f"group.consumer.min.{name}"]
        high = values[f"group.consumer.max.{name}"]
        if low > high:
            return (
                f"group.consumer.max.{name}",
                f"must be at least group.consumer.min.{name} ({low})",
            )
        if not low <= values[key] <= high:
            return (
                key,
                f"must be between {low} and {high} (group.consumer.min/max.{name})",
            )
    if (
        values["group.consumer.heartbeat.interval.ms"]
        >= values["group.consumer.session.timeout.ms"]
    ):
        return (
            "group.consumer.heartbeat.interval.ms",
            "must be less than group.consumer.session.timeout.ms",
        )
    if not values["group.consumer.assignors"]:
        return "group.consumer.assignors", "at least one assignor is required"
    return None
