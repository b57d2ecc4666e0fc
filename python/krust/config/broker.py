"""Broker configuration: every key krust reads, with Kafka's name, type, default and validation.

Sources, later ones winning: the defaults below < `--config FILE` (Java .properties) <
`KRUST_*` environment variables < `--override key=value`. Any unknown key, bad value or
unusable log directory is a `ConfigError` naming the key.
"""

from __future__ import annotations

import enum
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from krust.config.checks import consumer_group_problem, limits_problem
from krust.config.errors import ConfigError
from krust.config.listeners import (
    advertised_listeners,
    is_security_key,
    listener_security,
    mechanism_key,
    parse_listeners,
    protocol_map,
    split_listener_key,
)
from krust.config.properties import PropertiesError, parse_properties
from krust.config.roles import (
    default_controller_listeners,
    is_broker,
    resolve_inter_broker_listener,
    resolve_roles,
)
from krust.config.table import BROKER_KEYS, KEYS, config_string

ENV_PREFIX = "KRUST_"
# KRUST_* variables that are not config keys: the core's log filter (a tracing EnvFilter) and
# the test tooling's own settings.
NON_CONFIG_ENV = frozenset({"KRUST_LOG"})
NON_CONFIG_ENV_PREFIX = "KRUST_TEST_"
# Keys naming a plugin class: while one is set, keys krust does not know are kept for the
# plugin (Kafka hands plugins every config it was given) instead of being refused.
PLUGIN_CLASS_KEYS = ("authorizer.class.name", "metric.reporters")


def env_name(key: str) -> str:
    """The environment variable of a key: KRUST_ + upper case, dots as underscores."""
    return ENV_PREFIX + key.upper().replace(".", "_")


class ConfigSource(enum.Enum):
    DEFAULT = "default"
    FILE = "config file"
    ENV = "environment"
    OVERRIDE = "--override"


class BrokerConfig(Mapping[str, Any]):
    """Validated values by Kafka name, derived keys resolved the way Kafka resolves them:
    log.dirs (absolute paths), log.roll.ms, log.roll.jitter.ms, log.retention.ms,
    log.flush.interval.ms, advertised.listeners; listeners are `Listener` tuples and
    listener.security.protocol.map a dict."""

    def __init__(
        self,
        values: Mapping[str, Any],
        sources: Mapping[str, ConfigSource],
        originals: Mapping[str, str] | None = None,
    ) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self._originals = dict(originals or {})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def source(self, key: str) -> ConfigSource:
        """Where the key's value came from (for DescribeConfigs-style config sources)."""
        return self._sources.get(key, ConfigSource.DEFAULT)

    def originals(self) -> dict[str, str]:
        """Every key given to the broker as the string it was given, a plugin's own keys
        included (Kafka's AbstractConfig.originals): what plugins are configured with."""
        return dict(self._originals)


def load_config(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> BrokerConfig:
    """Merge every source, validate every key and check that the log directories are usable."""
    raw: dict[str, str | None] = {key.name: key.default for key in BROKER_KEYS}
    sources: dict[str, ConfigSource] = {}
    originals: dict[str, str] = {}
    unknown: dict[str, str] = {}
    prefixed: dict[str, Any] = {}

    def put(key: str, value: str, source: ConfigSource, origin: str) -> None:
        originals[key] = value
        if key in KEYS:
            raw[key] = value
        elif _is_listener_key(key):
            prefixed[key] = _listener_value(key, value, origin)
        else:
            # A plugin's own key, or a mistake: refused below unless a plugin is configured.
            unknown.setdefault(key, origin)
            return
        sources[key] = source

    if config_file is not None:
        for key, value in _read_properties(config_file).items():
            put(key, value, ConfigSource.FILE, str(config_file))
    by_env_name = {env_name(name): name for name in KEYS}
    for variable, value in sorted((env if env is not None else os.environ).items()):
        if variable in NON_CONFIG_ENV or variable.startswith(NON_CONFIG_ENV_PREFIX):
            continue
        if variable.startswith(ENV_PREFIX):
            if variable not in by_env_name:
                raise ConfigError(variable, "not a krust configuration variable")
            put(by_env_name[variable], value, ConfigSource.ENV, variable)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise ConfigError("--override", f"expected key=value, got {override!r}")
        put(key.strip(), value, ConfigSource.OVERRIDE, "--override")
    if unknown and not any(raw.get(key) for key in PLUGIN_CLASS_KEYS):
        key, origin = next(iter(unknown.items()))
        raise ConfigError(origin, f"unknown configuration key {key!r}")

    values = {name: KEYS[name].parse(value) for name, value in raw.items()}
    _resolve(values, given=set(sources))
    values["listener.security"] = _listener_security(values, prefixed)
    _check_log_dirs(values["log.dirs"])
    return BrokerConfig(values, sources, originals)


def _is_listener_key(key: str) -> bool:
    """A listener-prefixed key (listener.name.<l>.<key>)."""
    return split_listener_key(key) is not None


def _listener_value(key: str, raw: str, origin: str) -> Any:
    """The parsed value of a listener-prefixed security key (listener.name.<l>.ssl.*, ...)."""
    split = split_listener_key(key)
    if split is None:
        raise ConfigError(origin, f"unknown configuration key {key!r}")
    _, base = split
    if mechanism_key(base) is not None:
        return raw.strip()
    row = KEYS.get(base)
    if row is None or not is_security_key(base):
        raise ConfigError(key, f"{base!r} is not a key that can be set per listener")
    value, problem = row.problem(raw)
    if problem:
        raise ConfigError(key, f"invalid value {raw!r}: {problem}")
    return value


def _listener_security(values: Mapping[str, Any], prefixed: Mapping[str, Any]) -> dict[str, Any]:
    return listener_security(
        values["listeners"], values["listener.security.protocol.map"], values, prefixed
    )


def _read_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(str(path), f"cannot read the config file: {_reason(error)}") from None
    try:
        return parse_properties(text)
    except PropertiesError as error:
        raise ConfigError(str(path), str(error)) from None


def _resolve(values: dict[str, Any], given: set[str]) -> None:
    """Derived keys, Kafka's precedence (KafkaConfig.logRollTimeMillis & co); `given` are
    the keys a source set."""
    hour, minute = 3_600_000, 60_000
    if values["log.roll.ms"] is None:
        values["log.roll.ms"] = values["log.roll.hours"] * hour
    if values["log.roll.jitter.ms"] is None:
        values["log.roll.jitter.ms"] = values["log.roll.jitter.hours"] * hour
    if values["log.retention.ms"] is None:
        minutes = values["log.retention.minutes"]
        values["log.retention.ms"] = (
            minutes * minute if minutes is not None else values["log.retention.hours"] * hour
        )
    if values["log.retention.ms"] < 0:
        values["log.retention.ms"] = -1
    elif values["log.retention.ms"] == 0:
        raise ConfigError("log.retention.ms", "must be unlimited (-1) or at least 1")
    if values["log.flush.interval.ms"] is None:
        values["log.flush.interval.ms"] = values["log.flush.scheduler.interval.ms"]

    bad = consumer_group_problem(values)
    if bad:
        raise ConfigError(*bad)

    problem = limits_problem(values)
    if problem:
        raise ConfigError("max.connections.per.ip", problem)
    protocols = protocol_map(values["listener.security.protocol.map"])
    # Kafka's rule: a controller listener missing from the map speaks PLAINTEXT.
    values["controller.listener.names"] = [n.upper() for n in values["controller.listener.names"]]
    for name in values["controller.listener.names"]:
        protocols.setdefault(name, "PLAINTEXT")
    values["listener.security.protocol.map"] = protocols
    listeners = parse_listeners("listeners", values["listeners"])
    if not listeners:
        raise ConfigError("listeners", "at least one listener is required")
    for listener in listeners:
        protocol = values["listener.security.protocol.map"].get(listener.name)
        if protocol is None:
            raise ConfigError("listeners", f"no security protocol defined for {listener.name}")
    values["listeners"] = listeners
    if "controller.listener.names" not in given:
        default_controller_listeners(values)
    resolve_roles(values)
    if is_broker(values):
        values["advertised.listeners"] = advertised_listeners(
            values["advertised.listeners"], listeners, values["controller.listener.names"]
        )
    elif values["advertised.listeners"] is not None:
        raise ConfigError(
            "advertised.listeners",
            "a node with just the controller role advertises no listener to clients",
        )
    else:
        values["advertised.listeners"] = []
    resolve_inter_broker_listener(values)

    dirs = values["log.dirs"] if values["log.dirs"] is not None else [values["log.dir"]]
    dirs = [os.path.abspath(os.path.expanduser(d)) for d in dirs if d]
    if not dirs:
        raise ConfigError("log.dirs", "at least one log directory is required")
    if len(set(dirs)) != len(dirs):
        raise ConfigError("log.dirs", "a directory is listed more than once")
    values["log.dirs"] = dirs


def _check_log_dirs(dirs: list[str]) -> None:
    for directory in dirs:
        try:
            os.makedirs(directory, exist_ok=True)
            with tempfile.TemporaryFile(dir=directory):
                pass
        except OSError as error:
            raise ConfigError("log.dirs", f"{directory} is not usable: {_reason(error)}") from None


def _reason(error: Exception) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


def core_settings(config: BrokerConfig) -> dict[str, object]:
    """The `settings` mapping for `krust._core.Core`: every config key that has a value, as
    Kafka writes it (the core reads each through the config table, krust-config), and what
    this layer parsed: listeners, advertised.listeners and controller.quorum.voters as tuples,
    listener.security.protocol.map as a dict and each listener's security."""
    settings: dict[str, object] = {
        name: config_string(value)
        for name, value in config.items()
        if name in KEYS and value is not None
    }
    for key in ("listeners", "advertised.listeners", "controller.quorum.voters"):
        settings[key] = [tuple(entry) for entry in config[key]]
    for key in ("listener.security.protocol.map", "listener.security"):
        settings[key] = config[key]
    return settings
