"""Topic-level configs: Kafka's names, types and validation, and their effective values.

A topic config without an override takes the value of its broker synonym (Kafka's
ServerTopicConfigSynonyms), e.g. segment.ms falls back to log.roll.ms (itself resolved from
log.roll.hours).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krust.config import TOPIC_KEYS, ConfigKey, ConfigSource

# Kafka's DescribeConfigsResponse.ConfigSource ids, used by CreateTopics v5+ too.
TOPIC_CONFIG_SOURCE = 1
STATIC_BROKER_CONFIG_SOURCE = 4
DEFAULT_CONFIG_SOURCE = 5


class TopicConfigError(ValueError):
    """A topic config that cannot be set (Kafka answers INVALID_CONFIG)."""


TOPIC_CONFIG_KEYS: Mapping[str, ConfigKey] = {key.name: key for key in TOPIC_KEYS}


def validate_topic_configs(
    configs: Mapping[str, str | None], broker_config: Mapping[str, Any]
) -> None:
    """Raise TopicConfigError for the first unknown name, null value or bad value, checked
    against the config table, then for values that conflict once the broker defaults fill in
    the rest (Kafka's LogConfig.validateValues); all before anything is written."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise TopicConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    overrides: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            raise TopicConfigError(f"Unknown topic config name: {name}")
        overrides[name] = raw or ""
        _value, problem = key.problem(overrides[name])
        if problem:
            raise TopicConfigError(f"Invalid value {raw} for configuration {name}: {problem}")
    effective = {c.name: c.value for c in effective_topic_configs(overrides, broker_config)}
    low = int(effective["min.compaction.lag.ms"])
    high = int(effective["max.compaction.lag.ms"])
    if low > high:
        raise TopicConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


@dataclass(frozen=True)
class EffectiveConfig:
    name: str
    value: str
    source: int


def effective_topic_configs(
    overrides: Mapping[str, str], broker_config: Mapping[str, Any]
) -> list[EffectiveConfig]:
    """Every topic config with the value a topic with these overrides gets, sorted by name."""
    source_of = getattr(broker_config, "source", lambda _key: ConfigSource.DEFAULT)
    effective = []
    for name in sorted(TOPIC_CONFIG_KEYS):
        key = TOPIC_CONFIG_KEYS[name]
        if name in overrides:
            effective.append(EffectiveConfig(name, overrides[name], TOPIC_CONFIG_SOURCE))
        elif key.synonyms:
            explicit = any(source_of(s) is not ConfigSource.DEFAULT for s in key.synonyms)
            value = _as_config_string(broker_config[key.synonyms[0]])
            source = STATIC_BROKER_CONFIG_SOURCE if explicit else DEFAULT_CONFIG_SOURCE
            effective.append(EffectiveConfig(name, value, source))
        elif not key.internal:
            effective.append(EffectiveConfig(name, key.default or "", DEFAULT_CONFIG_SOURCE))
    return effective


def _as_config_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)
