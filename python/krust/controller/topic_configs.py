"""Topic-level configs: Kafka's names, types and validation, and their effective values.

A topic config without an override takes the value of its broker synonym (Kafka's
ServerTopicConfigSynonyms), e.g. segment.ms falls back to log.roll.ms (itself resolved from
log.roll.hours).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krust.config.table import TOPIC_KEYS, ConfigKey, config_string
from krust.controller.broker_configs import EffectiveBrokerConfig, Source, Synonym


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
    source: Source
    synonyms: tuple[Synonym, ...] = ()


def effective_topic_configs(
    overrides: Mapping[str, str], broker_config: Mapping[str, Any]
) -> list[EffectiveConfig]:
    """Every topic config with the value a topic with these overrides gets, sorted by name,
    with its synonyms: the override, then its broker default's family by precedence (Kafka's
    ConfigHelper.createTopicConfigEntry); the first one is the value's source."""
    broker = (
        broker_config
        if isinstance(broker_config, EffectiveBrokerConfig)
        else EffectiveBrokerConfig(broker_config)
    )
    effective = []
    for name in sorted(TOPIC_CONFIG_KEYS):
        key = TOPIC_CONFIG_KEYS[name]
        if key.internal and name not in overrides:
            continue
        synonyms = broker.synonyms(key.synonyms[0]) if key.synonyms else []
        if name in overrides:
            value = overrides[name]
            synonyms.insert(0, Synonym(name, value, Source.DYNAMIC_TOPIC_CONFIG))
        elif key.synonyms:
            value = config_string(broker[key.synonyms[0]])
        else:
            value = key.default or ""
        source = synonyms[0].source if synonyms else Source.DEFAULT_CONFIG
        effective.append(EffectiveConfig(name, value, source, tuple(synonyms)))
    return effective
