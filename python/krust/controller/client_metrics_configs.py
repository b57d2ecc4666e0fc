"""Client metrics subscriptions (KIP-714; Kafka's ClientMetricsConfigs): the keys of a
CLIENT_METRICS config resource, Kafka's checks of them, and a subscription as the broker's
client metrics manager reads it from the image.

A subscription is a CLIENT_METRICS resource named by the operator (`kafka-client-metrics
--name`); its configs are ConfigRecords of resource type 16 in the metadata log, like a topic's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krust.config.table import CLIENT_METRICS_KEYS, ConfigKey, parse_typed

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
KEYS: Mapping[str, ConfigKey] = {key.name: key for key in CLIENT_METRICS_KEYS}
# A subscription's metrics list with this item subscribes every metric.
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = int(KEYS[INTERVAL_MS].default or 300000)


class Selector(enum.StrEnum):
    """What a `match` entry may select clients by (Kafka's ALLOWED_MATCH_PARAMS)."""

    CLIENT_INSTANCE_ID = "client_instance_id"
    CLIENT_ID = "client_id"
    CLIENT_SOFTWARE_NAME = "client_software_name"
    CLIENT_SOFTWARE_VERSION = "client_software_version"
    CLIENT_SOURCE_ADDRESS = "client_source_address"
    CLIENT_SOURCE_PORT = "client_source_port"


class ClientMetricsConfigError(ValueError):
    """A subscription Kafka refuses, with Kafka's message; `invalid_config` tells
    INVALID_CONFIG (a value Kafka's ConfigDef or pattern check refuses) from INVALID_REQUEST."""

    def __init__(self, message: str, *, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


def _invalid_request(message: str) -> ClientMetricsConfigError:
    return ClientMetricsConfigError(message, invalid_config=False)


def _invalid_config(message: str) -> ClientMetricsConfigError:
    return ClientMetricsConfigError(message, invalid_config=True)


def _list(name: str, raw: str) -> list[str]:
    """A LIST value as Kafka's ValidList.anyNonDuplicateValues(emptyAllowed, no null) takes it."""
    items: list[str] = parse_typed(KEYS[name].type, raw)
    if len(set(items)) != len(items):
        raise _invalid_config(f"Configuration '{name}' values must not be duplicated.")
    return items


def _compile(pattern: str) -> Any:
    """The RE2 regex of a match value (Kafka compiles them with RE2/J)."""
    import re2  # type: ignore[import-untyped]

    return re2.compile(pattern)


def _split_selector(entry: str) -> tuple[Selector, str]:
    """`name=regex` split at the first '=' (the regex may hold more), both trimmed."""
    name, equals, pattern = entry.partition("=")
    try:
        selector = Selector(name.strip())
    except ValueError:
        raise _invalid_config(f"Illegal client matching pattern: {entry}") from None
    if not equals:
        raise _invalid_config(f"Illegal client matching pattern: {entry}")
    return selector, pattern.strip()


def validate(name: str, new: Mapping[str, str], old: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: a named subscription, known keys, an interval
    within 100 ms..1 h, and, when `match` is new or changed, RE2 patterns of known selectors."""
    if not name:
        raise _invalid_request("Subscription name can't be empty")
    for key in new:
        if key not in KEYS:
            raise _invalid_request(f"Unknown client metrics configuration: {key}")
    if METRICS in new:
        _list(METRICS, new[METRICS])
    if INTERVAL_MS in new:
        try:
            interval = parse_typed(KEYS[INTERVAL_MS].type, new[INTERVAL_MS])
        except ValueError as error:
            raise _invalid_config(
                f"Invalid value {new[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                f"{str(error)[:1].upper()}{str(error)[1:]}"
            ) from None
        if not 100 <= interval <= 3_600_000:
            raise _invalid_request(
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 "
                "and 3600000 (1 hour)"
            )
    if MATCH in new and new[MATCH] != old.get(MATCH):
        import re2

        for entry in _list(MATCH, new[MATCH]):
            selector, pattern = _split_selector(entry)
            try:
                _compile(pattern)
            except re2.error as refused:
                raise _invalid_config(
                    f"Client match pattern `{selector}={pattern}` is not a valid regular "
                    f"expression: {refused}."
                ) from None


@dataclass(frozen=True)
class Subscription:
    """One subscription as the broker applies it (Kafka's SubscriptionInfo)."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[Selector, Any]  # compiled RE2 patterns, all of which must match

    @staticmethod
    def from_configs(name: str, configs: Mapping[str, str]) -> Subscription:
        """The subscription a stored resource's configs describe (defaults for absent keys).
        Stored configs were validated when written; a pattern RE2 cannot compile matches
        nothing rather than stopping the broker."""
        interval = configs.get(INTERVAL_MS)
        match: dict[Selector, Any] = {}
        for entry in parse_typed(KEYS[MATCH].type, configs.get(MATCH, "")):
            try:
                selector, pattern = _split_selector(entry)
                match[selector] = _compile(pattern)
            except Exception:
                match[Selector.CLIENT_INSTANCE_ID] = _compile(r"[^\s\S]")
        return Subscription(
            name=name,
            metrics=frozenset(parse_typed(KEYS[METRICS].type, configs.get(METRICS, ""))),
            interval_ms=int(interval) if interval is not None else DEFAULT_INTERVAL_MS,
            match=match,
        )

    def matches(self, client: Mapping[Selector, str]) -> bool:
        """Whether every selector's pattern matches the whole of the client's value (Kafka's
        ClientMetricsInstanceMetadata.isMatch); no selectors match every client."""
        for selector, pattern in self.match.items():
            value = client.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True
