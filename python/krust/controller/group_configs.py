"""Dynamic group configs (Kafka 4's GroupConfig, `kafka-configs --entity-type groups`): which
ones act, and Kafka's checks of them against the broker's bounds.

A group config overrides the broker key it is named after for one group; a group without one
runs with the broker's value, which is also what DescribeConfigs shows as its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krust.config.table import ConfigType, parse_typed

CONSUMER_SESSION_TIMEOUT = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
# The group configs that act, with the broker key each one overrides.
BROKER_KEYS = {
    CONSUMER_SESSION_TIMEOUT: "group.consumer.session.timeout.ms",
    CONSUMER_HEARTBEAT_INTERVAL: "group.consumer.heartbeat.interval.ms",
}


class GroupConfigError(ValueError):
    """A group config Kafka refuses (INVALID_CONFIG), with Kafka's message."""


def effective(name: str, configs: Mapping[str, str], broker: Mapping[str, Any]) -> int:
    """The value a group runs with: its own, else the broker's."""
    value = configs.get(name)
    # Kafka parses it as its ConfigDef type (INT): Python's int() would take "1_000" too.
    return (
        parse_typed(ConfigType.INT, value) if value is not None else int(broker[BROKER_KEYS[name]])
    )


def validate(configs: Mapping[str, str], broker: Mapping[str, Any]) -> None:
    """Kafka's GroupConfig.validateValues for the consumer keys: within the broker's bounds, and
    the session longer than the heartbeat interval."""
    values: dict[str, int] = {}
    for name in BROKER_KEYS:
        try:
            values[name] = effective(name, configs, broker)
        except ValueError:
            raise GroupConfigError(
                f"Invalid value {configs[name]} for configuration {name}: Not a number of type INT"
            ) from None
    heartbeat = values[CONSUMER_HEARTBEAT_INTERVAL]
    session = values[CONSUMER_SESSION_TIMEOUT]
    bounds = [
        (CONSUMER_HEARTBEAT_INTERVAL, heartbeat, "heartbeat.interval.ms"),
        (CONSUMER_SESSION_TIMEOUT, session, "session.timeout.ms"),
    ]
    for name, value, suffix in bounds:
        low_key, high_key = f"group.consumer.min.{suffix}", f"group.consumer.max.{suffix}"
        if value < int(broker[low_key]):
            raise GroupConfigError(f"{name} must be greater than or equal to {low_key}")
        if value > int(broker[high_key]):
            raise GroupConfigError(f"{name} must be less than or equal to {high_key}")
    if session <= heartbeat:
        raise GroupConfigError(
            f"{CONSUMER_SESSION_TIMEOUT} must be greater than {CONSUMER_HEARTBEAT_INTERVAL}"
        )
