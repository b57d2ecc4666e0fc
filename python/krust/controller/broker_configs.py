"""Dynamic broker configs (Kafka's DynamicBrokerConfig): the static config file's values
overridden by ConfigRecords of the BROKER resource, per broker ("1") or cluster-wide ("").

Precedence is Kafka's: dynamic per-broker > dynamic cluster-wide default > static > default.
krust applies a broker key live when it is the broker default of a topic config (e.g.
log.segment.bytes for segment.bytes: the core re-applies every topic's effective config when
such a default changes), a connection limit, a replication throttle, or one of the log
cleaner's keys Kafka's LogCleaner reconfigures (its threads restart with them). Any other
dynamic key is refused (INVALID_CONFIG) rather than stored and ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from krust.config.broker import ConfigSource
from krust.config.checks import OVERRIDES_KEY
from krust.config.table import KEYS, TOPIC_KEYS, ConfigKey, DynamicUpdateMode, config_string
from krust.security.connection_limits import CONNECTION_LIMIT_KEYS


class Source(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: Source


class BrokerConfigChangeError(ValueError):
    """A broker config change Kafka or krust refuses; `invalid_config` tells INVALID_CONFIG
    (krust cannot honour it) from INVALID_REQUEST (Kafka's answer, KAFKA-13609)."""

    def __init__(self, message: str, invalid_config: bool = False) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
CLEANER_THREADS = "log.cleaner.threads"
# Kafka's LogCleaner.ReconfigurableConfigs that krust has (log.cleaner.io.buffer.size and
# log.cleaner.io.buffer.load.factor are not krust keys): the order of
# Core.reconfigure_cleaner's arguments.
CLEANER_KEYS = (
    CLEANER_THREADS,
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.backoff.ms",
    "log.cleaner.io.max.bytes.per.second",
)
# The broker keys that are a topic config's default: the core re-applies them live; the
# connection limits, which the core applies to new connections; the replication throttles
# (KIP-73), with the one of replica moves between log dirs (KIP-113); and the log cleaner's,
# with which its threads restart.
LIVE_KEYS = (
    frozenset(
        key.synonyms[0]
        for key in TOPIC_KEYS
        if key.synonyms and KEYS[key.synonyms[0]].dynamic is not DynamicUpdateMode.READ_ONLY
    )
    | CONNECTION_LIMIT_KEYS
    | {LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_THROTTLED_RATE}
    | frozenset(CLEANER_KEYS)
)
# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: a broker key's derived-key family.
_FAMILIES = {name: key.synonyms for key in TOPIC_KEYS for name in key.synonyms}


def broker_synonyms(name: str) -> tuple[str, ...]:
    return _FAMILIES.get(name, (name,))


class EffectiveBrokerConfig(Mapping[str, Any]):
    """The broker config in force: static values with the dynamic overrides applied; typed
    values by Kafka name, like `krust.config.broker.BrokerConfig`."""

    def __init__(
        self,
        static: Mapping[str, Any],
        per_broker: Mapping[str, str] | None = None,
        cluster_default: Mapping[str, str] | None = None,
    ) -> None:
        self.static = static
        self.per_broker = dict(per_broker or {})
        self.cluster_default = dict(cluster_default or {})

    def __getitem__(self, name: str) -> Any:
        for dynamic in (self.per_broker, self.cluster_default):
            if name in dynamic:
                return KEYS[name].parse(dynamic[name])
        return self.static[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.static)

    def __len__(self) -> int:
        return len(self.static)

    def _static_explicit(self, name: str) -> bool:
        source = getattr(self.static, "source", None)
        return source is not None and source(name) is not ConfigSource.DEFAULT

    def synonyms(self, name: str) -> list[Synonym]:
        """Every value set for `name`'s family, highest precedence first (Kafka's
        ConfigHelper.configSynonyms, before it drops the entries of other family members)."""
        family = broker_synonyms(name)
        found: list[Synonym] = []
        for source, values in (
            (Source.DYNAMIC_BROKER_CONFIG, self.per_broker),
            (Source.DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
        ):
            found += [Synonym(n, values[n], source) for n in family if n in values]
        found += [
            Synonym(n, config_string(self.static[n]), Source.STATIC_BROKER_CONFIG)
            for n in family
            if self._static_explicit(n)
        ]
        found += [
            Synonym(n, KEYS[n].default, Source.DEFAULT_CONFIG)
            for n in family
            if KEYS[n].default is not None
        ]
        return found

    def topic_defaults(self) -> dict[str, str]:
        """Every topic key's broker default, by topic key name, as the core's log defaults."""
        return {
            key.name: config_string(self[key.synonyms[0]]) for key in TOPIC_KEYS if key.synonyms
        }


class ReplicationThrottleCore(Protocol):
    def set_replication_throttled_rates(self, leader: int, follower: int) -> None: ...
    def set_alter_log_dirs_throttled_rate(self, rate: int) -> None: ...


def push_replication_throttled_rates(
    core: ReplicationThrottleCore, config: Mapping[str, Any]
) -> None:
    """Hand the core this broker's leader and follower replication throttles in force, and
    the throttle of replica moves between its log dirs."""
    core.set_replication_throttled_rates(
        config[LEADER_THROTTLED_RATE], config[FOLLOWER_THROTTLED_RATE]
    )
    core.set_alter_log_dirs_throttled_rate(config[ALTER_LOG_DIRS_THROTTLED_RATE])


class CleanerCore(Protocol):
    def reconfigure_cleaner(
        self,
        threads: int,
        dedupe_buffer_size: int,
        backoff_ms: int,
        io_max_bytes_per_second: float,
    ) -> None: ...


def push_cleaner_config(core: CleanerCore, config: Mapping[str, Any]) -> None:
    """Hand the core the log cleaner's settings in force (it restarts its threads on a change)."""
    threads, dedupe, backoff, rate = (config[key] for key in CLEANER_KEYS)
    core.reconfigure_cleaner(threads, dedupe, backoff, float(rate))


def validate_broker_change(
    resource_name: str,
    new_configs: Mapping[str, str],
    changed: set[str],
    current: Mapping[str, Any] | None = None,
) -> None:
    """Check the resulting dynamic configs of one BROKER resource (`""`: cluster-wide) whose
    keys in `changed` were altered, against the config in force (`current`, for the keys
    Kafka bounds by their current value); raises BrokerConfigChangeError naming the keys."""
    unknown = sorted(name for name in changed if name not in KEYS)
    if unknown:
        raise BrokerConfigChangeError(
            f"Unknown broker config name: {', '.join(unknown)}", invalid_config=True
        )
    read_only = sorted(n for n in changed if KEYS[n].dynamic is DynamicUpdateMode.READ_ONLY)
    if read_only:
        raise BrokerConfigChangeError(
            f"Cannot update these configs dynamically: Set({', '.join(read_only)})"
        )
    per_broker = sorted(n for n in changed if KEYS[n].dynamic is DynamicUpdateMode.PER_BROKER)
    if not resource_name and per_broker:
        raise BrokerConfigChangeError(
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: Set({', '.join(per_broker)})"
        )
    for name in sorted(changed):
        if name in new_configs:
            _check_value(KEYS[name], new_configs[name])
    # Kafka's rule across keys; the overrides must come with a dynamic 0 (not only from the
    # static file), so a change cannot shut every client out.
    if (
        new_configs.get("max.connections.per.ip", "").strip() == "0"
        and not new_configs.get(OVERRIDES_KEY, "").strip()
    ):
        raise BrokerConfigChangeError(
            f"max.connections.per.ip can be set to zero only if {OVERRIDES_KEY} property is set."
        )
    if CLEANER_THREADS in changed and CLEANER_THREADS in new_configs and current is not None:
        _check_cleaner_threads(int(new_configs[CLEANER_THREADS]), current[CLEANER_THREADS])
    not_live = sorted(changed - LIVE_KEYS)
    if not_live:
        raise BrokerConfigChangeError(
            f"krust cannot apply a change of {', '.join(not_live)} while running: set it in "
            "the broker's config file and restart",
            invalid_config=True,
        )


def _check_cleaner_threads(threads: int, current: int) -> None:
    """Kafka's LogCleaner.validateReconfiguration: at least 1, and from half to double the
    threads running (halved as Java's integer division does)."""
    problem = None
    if threads < 1:
        problem = "Log cleaner threads should be at least 1"
    elif threads < current // 2:
        problem = (
            f"Log cleaner threads cannot be reduced to less than half the current value {current}"
        )
    elif threads > current * 2:
        problem = (
            "Log cleaner threads cannot be increased to more than double the current value "
            f"{current}"
        )
    if problem is not None:
        message = f"Invalid value {threads} for {CLEANER_THREADS}: {problem}"
        raise BrokerConfigChangeError(message)


def _check_value(key: ConfigKey, raw: str) -> None:
    _value, problem = key.problem(raw)
    if problem:
        # Kafka answers a bad value with INVALID_REQUEST; a value krust refuses is its own.
        raise BrokerConfigChangeError(
            f"Invalid value {raw} for configuration {key.name}: {problem}",
            invalid_config=key.refused is not None,
        )
