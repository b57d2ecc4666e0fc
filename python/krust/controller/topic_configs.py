"""Topic-level configs: Kafka's names, types and validation, and their effective values.

A topic config without an override takes the value of its broker synonym (Kafka's
ServerTopicConfigSynonyms), e.g. segment.ms falls back to log.roll.ms (itself resolved from
log.roll.hours).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krust.config import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
    ConfigSource,
    ConfigType,
    Validator,
    at_least,
    between,
    each_one_of,
    one_of,
    parse_typed,
)

# Kafka's DescribeConfigsResponse.ConfigSource ids, used by CreateTopics v5+ too.
TOPIC_CONFIG_SOURCE = 1
STATIC_BROKER_CONFIG_SOURCE = 4
DEFAULT_CONFIG_SOURCE = 5


class TopicConfigError(ValueError):
    """A topic config that cannot be set (Kafka answers INVALID_CONFIG)."""


def _gzip_level(level: int) -> str | None:
    return None if level == -1 or 1 <= level <= 9 else "value must be -1 or in [1, 9]"


def _no_remote_storage(enabled: bool) -> str | None:
    return "krust has no tiered storage" if enabled else None


_THROTTLED = re.compile(r"\*|([0-9]+:[0-9]+)(,[0-9]+:[0-9]+)*")


def _throttled_replicas(replicas: list[str]) -> str | None:
    text = ",".join(replicas)
    return None if not text or _THROTTLED.fullmatch(text) else "expected * or partition:broker,..."


@dataclass(frozen=True)
class TopicConfigKey:
    """A topic config; `synonyms` are the broker keys its default comes from (the first holds
    the resolved value), `default` is used when it has none."""

    name: str
    type: ConfigType
    validator: Validator | None
    synonyms: tuple[str, ...] = ()
    default: str = ""

    def validate(self, raw: str) -> None:
        problem: str | None
        try:
            value = parse_typed(self.type, raw)
        except ValueError as error:
            problem = str(error)
        else:
            problem = self.validator(value) if self.validator else None
        if problem:
            raise TopicConfigError(f"Invalid value {raw} for configuration {self.name}: {problem}")


_T = ConfigType
# fmt: off
TOPIC_CONFIG_KEYS: Mapping[str, TopicConfigKey] = {key.name: key for key in (
    TopicConfigKey("cleanup.policy", _T.LIST, each_one_of(*CLEANUP_POLICIES),
                   ("log.cleanup.policy",)),
    TopicConfigKey("compression.type", _T.STRING, one_of(*COMPRESSION_TYPES),
                   ("compression.type",)),
    TopicConfigKey("compression.gzip.level", _T.INT, _gzip_level, default="-1"),
    TopicConfigKey("compression.lz4.level", _T.INT, between(1, 17), default="9"),
    TopicConfigKey("compression.zstd.level", _T.INT, between(-131072, 22), default="3"),
    TopicConfigKey("delete.retention.ms", _T.LONG, at_least(0),
                   ("log.cleaner.delete.retention.ms",)),
    TopicConfigKey("file.delete.delay.ms", _T.LONG, at_least(0),
                   ("log.segment.delete.delay.ms",)),
    TopicConfigKey("flush.messages", _T.LONG, at_least(1), ("log.flush.interval.messages",)),
    TopicConfigKey("flush.ms", _T.LONG, at_least(0),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    TopicConfigKey("follower.replication.throttled.replicas", _T.LIST, _throttled_replicas),
    TopicConfigKey("index.interval.bytes", _T.INT, at_least(0), ("log.index.interval.bytes",)),
    TopicConfigKey("leader.replication.throttled.replicas", _T.LIST, _throttled_replicas),
    TopicConfigKey("local.retention.bytes", _T.LONG, at_least(-2), default="-2"),
    TopicConfigKey("local.retention.ms", _T.LONG, at_least(-2), default="-2"),
    TopicConfigKey("max.compaction.lag.ms", _T.LONG, at_least(1),
                   ("log.cleaner.max.compaction.lag.ms",)),
    TopicConfigKey("max.message.bytes", _T.INT, at_least(0), ("message.max.bytes",)),
    TopicConfigKey("message.timestamp.after.max.ms", _T.LONG, at_least(0),
                   ("log.message.timestamp.after.max.ms",)),
    TopicConfigKey("message.timestamp.before.max.ms", _T.LONG, at_least(0),
                   ("log.message.timestamp.before.max.ms",)),
    TopicConfigKey("message.timestamp.type", _T.STRING, one_of(*TIMESTAMP_TYPES),
                   ("log.message.timestamp.type",)),
    TopicConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, between(0, 1),
                   ("log.cleaner.min.cleanable.ratio",)),
    TopicConfigKey("min.compaction.lag.ms", _T.LONG, at_least(0),
                   ("log.cleaner.min.compaction.lag.ms",)),
    TopicConfigKey("min.insync.replicas", _T.INT, at_least(1), ("min.insync.replicas",)),
    TopicConfigKey("preallocate", _T.BOOLEAN, None, ("log.preallocate",)),
    TopicConfigKey("remote.storage.enable", _T.BOOLEAN, _no_remote_storage, default="false"),
    TopicConfigKey("retention.bytes", _T.LONG, None, ("log.retention.bytes",)),
    TopicConfigKey("retention.ms", _T.LONG, at_least(-1),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    TopicConfigKey("segment.bytes", _T.INT, at_least(14), ("log.segment.bytes",)),
    TopicConfigKey("segment.index.bytes", _T.INT, at_least(4), ("log.index.size.max.bytes",)),
    TopicConfigKey("segment.jitter.ms", _T.LONG, at_least(0),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    TopicConfigKey("segment.ms", _T.LONG, at_least(1), ("log.roll.ms", "log.roll.hours")),
    TopicConfigKey("unclean.leader.election.enable", _T.BOOLEAN, None,
                   ("unclean.leader.election.enable",)),
)}
# fmt: on


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise TopicConfigError for the first unknown name, null value or bad value."""
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise TopicConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    for name, value in configs.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            raise TopicConfigError(f"Unknown topic config name: {name}")
        key.validate(value or "")


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
        else:
            effective.append(EffectiveConfig(name, key.default, DEFAULT_CONFIG_SOURCE))
    return effective


def _as_config_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)
