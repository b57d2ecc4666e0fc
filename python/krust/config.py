"""Broker configuration: every key krust reads, with Kafka's name, type, default and validation.

Sources, later ones winning: the defaults below < `--config FILE` (Java .properties) <
`KRUST_*` environment variables < `--override key=value`. Any unknown key, bad value or
unusable log directory is a `ConfigError` naming the key.
"""

from __future__ import annotations

import base64
import enum
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

ENV_PREFIX = "KRUST_"
# KRUST_* variables that are not config keys: the core's log filter (a tracing EnvFilter) and
# the test tooling's own settings.
NON_CONFIG_ENV = frozenset({"KRUST_LOG"})
NON_CONFIG_ENV_PREFIX = "KRUST_TEST_"
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Keys naming a plugin class: while one is set, keys krust does not know are kept for the
# plugin (Kafka hands plugins every config it was given) instead of being refused.
PLUGIN_CLASS_KEYS = ("authorizer.class.name",)


class ConfigError(Exception):
    """A configuration problem that stops start-up; `str()` is one line naming the key."""

    def __init__(self, key: str | None, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem


class ConfigType(enum.Enum):
    """Kafka's ConfigDef types, with Kafka's parsing rules."""

    BOOLEAN = "BOOLEAN"
    SHORT = "SHORT"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    LIST = "LIST"
    PASSWORD = "PASSWORD"


_INTEGER = re.compile(r"[+-]?[0-9]+")
# What Java's Double.parseDouble reads (hexadecimal literals aside): Python's float() also takes
# "1_000", "inf", "nan" and non-ASCII digits, which Kafka refuses.
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_INTEGER_BOUNDS = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT_MAX),
    ConfigType.LONG: (-(2**63), LONG_MAX),
}


def parse_typed(config_type: ConfigType, raw: str) -> Any:
    """Parse `raw` the way Kafka's ConfigDef does; raises ValueError with the reason."""
    text = raw.strip()
    if config_type is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ValueError("expected true or false")
    if config_type in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[config_type]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(f"not a number of type {config_type.value}")
        return int(text)
    if config_type is ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(text):
            raise ValueError("not a number of type DOUBLE")
        return float(text.rstrip("fFdD"))
    if config_type is ConfigType.LIST:
        return [] if not text else [item.strip() for item in text.split(",")]
    return text


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
    from krust.roles_config import VOTER

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
    from krust.connection_limits import overrides_problem

    return overrides_problem(text)


# The table's named checks: what bounds and choices cannot say.
CHECKS: Mapping[str, Validator] = {
    "uuid": _valid_uuid,
    "voters": _valid_voters,
    "gzip_level": _gzip_level,
    "throttled_replicas": _throttled_replicas,
    "ip_overrides": _ip_overrides,
}


class DynamicUpdateMode(enum.Enum):
    """Kafka's dynamic update mode of a broker key (DynamicBrokerConfig)."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


@dataclass(frozen=True)
class ConfigKey:
    """One row of the config table (config_keys.toml; docs/config.md): Kafka's name, type,
    default (None: unset), bounds, choices or a named check, and a one-line doc."""

    name: str
    type: ConfigType
    default: str | None
    doc: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    check: str | None = None
    kafka_min: float | None = None
    why: str | None = None
    dynamic: DynamicUpdateMode | None = None
    synonyms: tuple[str, ...] = ()
    internal: bool = False
    honoured_by: str | None = None
    refused: str | None = None

    def problem(self, raw: str) -> tuple[Any, str | None]:
        """The parsed value and why it is invalid (None: valid)."""
        try:
            value = parse_typed(self.type, raw)
        except ValueError as error:
            return None, str(error)
        problem = self._value_problem(value)
        if problem is None and self.refused is not None and not self.is_default(value):
            problem = f"krust accepts only the default ({self.default}): {self.refused}"
        return value, problem

    def is_default(self, value: Any) -> bool:
        """Whether a parsed value equals the key's default."""
        return self.default is not None and value == parse_typed(self.type, self.default)

    def _value_problem(self, value: Any) -> str | None:
        low, high = self.min, self.max
        if low is not None and high is not None and not low <= value <= high:
            return f"value must be in [{_number(low)}, {_number(high)}]"
        if low is not None and value < low:
            return f"value must be at least {_number(low)}"
        if high is not None and value > high:
            return f"value must be at most {_number(high)}"
        if self.choices:
            items = value if isinstance(value, list) else [value]
            bad = [item for item in items if item not in self.choices]
            if bad:
                return f"{', '.join(bad)} not in {', '.join(self.choices)}"
        return CHECKS[self.check](value) if self.check else None

    def parse(self, raw: str | None) -> Any:
        """The typed value of a broker key; raises ConfigError naming the key."""
        if raw is None:
            return None
        value, problem = self.problem(raw)
        if problem:
            raise ConfigError(self.name, f"invalid value {raw!r}: {problem}")
        return value


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


# The table's source; the core embeds it at build time and hands it over parsed (`_load`).
TABLE_PATH = Path(__file__).with_name("config_keys.toml")
_FIELDS = {field.name for field in fields(ConfigKey)}


def _row(entry: Mapping[str, Any]) -> ConfigKey:
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ValueError(f"{entry.get('name')}: unknown fields {sorted(unknown)}")
    row = dict(entry)
    row["type"] = ConfigType(row["type"])
    row.setdefault("default", None)
    for name in ("choices", "synonyms"):
        row[name] = tuple(row.get(name, ()))
    if "dynamic" in row:
        row["dynamic"] = DynamicUpdateMode(row["dynamic"])
    key = ConfigKey(**row)
    if key.check is not None and key.check not in CHECKS:
        raise ValueError(f"{key.name}: unknown check {key.check!r}")
    return key


def _load() -> dict[str, Any]:
    """The table as the core embeds it (so editing the file takes a rebuild, as for the core);
    the core parses it much faster than Python's tomllib."""
    from krust import _core

    return _core.config_table()


ConfigKeys = tuple[ConfigKey, ...]


def load_table() -> tuple[ConfigKeys, ConfigKeys, ConfigKeys]:
    """The broker keys, the topic keys and the group keys (Kafka 4's GroupConfig) of the config
    table, parsed once."""
    table = _load()
    broker, topic, group = (tuple(map(_row, table[kind])) for kind in ("broker", "topic", "group"))
    return broker, topic, group


BROKER_KEYS, TOPIC_KEYS, GROUP_KEYS = load_table()
KEYS: Mapping[str, ConfigKey] = {key.name: key for key in BROKER_KEYS}


def env_name(key: str) -> str:
    """The environment variable of a key: KRUST_ + upper case, dots as underscores."""
    return ENV_PREFIX + key.upper().replace(".", "_")


class Listener(NamedTuple):
    """One listener, as the core receives it: (name, host, port)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"(.+)://\[?([0-9A-Za-z\-%._:]*)\]?:(-?[0-9]+)")


def parse_listeners(key: str, entries: list[str]) -> list[Listener]:
    listeners = []
    for entry in entries:
        match = _LISTENER.fullmatch(entry)
        if not match or not 0 <= int(match[3]) <= 65535:
            raise ConfigError(key, f"invalid listener {entry!r}: expected NAME://host:port")
        listeners.append(Listener(match[1].upper(), match[2], int(match[3])))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(key, "each listener must have a different name")
    return listeners


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
    _resolve(values)
    values["listener.security"] = _listener_security(values, prefixed)
    _check_log_dirs(values["log.dirs"])
    return BrokerConfig(values, sources, originals)


def _is_listener_key(key: str) -> bool:
    """A listener-prefixed key (listener.name.<l>.<key>)."""
    from krust.security_config import split_listener_key

    return split_listener_key(key) is not None


def _listener_value(key: str, raw: str, origin: str) -> Any:
    """The parsed value of a listener-prefixed security key (listener.name.<l>.ssl.*, ...)."""
    # Imported here: krust.security_config builds on this module's ConfigError.
    from krust.security_config import is_security_key, mechanism_key, split_listener_key

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
    from krust.security_config import listener_security

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


class PropertiesError(ValueError):
    """A malformed .properties file."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text like java.util.Properties.load: `#`/`!` comments,
    `key=value`, `key: value` and `key value`, backslash line continuations, escapes
    (\\t \\n \\r \\f \\uXXXX, backslash before any other character keeps that character)."""
    entries: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key_end = _find_key_end(line)
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        try:
            entries[_unescape(line[:key_end])] = _unescape(rest)
        except PropertiesError as error:
            raise PropertiesError(f"line {number}: {error}") from None
    return entries


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Logical lines (continuations joined, comments and blank lines dropped) with the number
    of the line each starts on."""
    pending: list[str] = []
    start = 0
    for number, natural in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        stripped = natural.lstrip(" \t\f")
        if not pending:
            if not stripped or stripped[0] in "#!":
                continue
            start = number
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2:
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


def _find_key_end(line: str) -> int:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            return index
        index += 1
    return len(line)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            out.append(char)
            continue
        code = text[index]
        index += 1
        if code == "u":
            digits = text[index : index + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesError("malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPES.get(code, code))
    # Java writes a character beyond the BMP as two \u escapes, its UTF-16 surrogate pair.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _resolve(values: dict[str, Any]) -> None:
    """Derived keys, Kafka's precedence (KafkaConfig.logRollTimeMillis & co)."""
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

    from krust.connection_limits import limits_problem
    from krust.group.settings import consumer_group_problem

    bad = consumer_group_problem(values)
    if bad:
        raise ConfigError(*bad)

    problem = limits_problem(values)
    if problem:
        raise ConfigError("max.connections.per.ip", problem)
    protocols = _protocol_map(values["listener.security.protocol.map"])
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
    from krust.roles_config import is_broker, resolve_inter_broker_listener, resolve_roles

    resolve_roles(values)
    if is_broker(values):
        values["advertised.listeners"] = _advertised(
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


def _protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.strip().upper() not in _PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map",
                f"invalid entry {entry!r}: expected NAME:PROTOCOL "
                f"with PROTOCOL one of {', '.join(_PROTOCOLS)}",
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _advertised(
    entries: list[str] | None, listeners: list[Listener], controller_names: list[str]
) -> list[Listener]:
    """What brokers advertise to clients: never a controller listener (Kafka's rule)."""
    if entries is None:
        # Like Kafka: an empty listener host is advertised as this machine's host name.
        advertised = [
            lst._replace(host=lst.host or socket.gethostname())
            for lst in listeners
            if lst.name not in controller_names
        ]
    else:
        advertised = parse_listeners("advertised.listeners", entries)
    if not advertised:
        raise ConfigError("listeners", "at least one listener that is not a controller listener")
    names = {listener.name for listener in listeners}
    for listener in advertised:
        if listener.name not in names:
            raise ConfigError("advertised.listeners", f"{listener.name} is not in listeners")
        if listener.name in controller_names:
            raise ConfigError(
                "advertised.listeners",
                f"{listener.name} is a controller listener (controller.listener.names): "
                "clients do not send requests to controllers",
            )
        if listener.host in ("0.0.0.0", "::", ""):
            raise ConfigError(
                "advertised.listeners",
                f"{listener} is not routable: set advertised.listeners to a host clients can reach",
            )
    return advertised


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
    """The flat `settings` mapping for `krust._core.Broker`: every key under its Kafka name,
    listeners as (name, host, port) tuples and log.dirs as absolute paths."""
    settings: dict[str, object] = dict(config)
    for key in ("listeners", "advertised.listeners", "controller.quorum.voters"):
        settings[key] = [tuple(entry) for entry in config[key]]
    return settings
