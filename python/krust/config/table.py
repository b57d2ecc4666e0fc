"""The config table (config_keys.toml; docs/config.md): every key's Kafka name, type, default,
bounds and named check, parsed the way Kafka's ConfigDef parses values."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from krust.config.checks import CHECKS
from krust.config.errors import ConfigError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


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


def config_string(value: object) -> str:
    """A typed config value as Kafka writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{name}:{item}" for name, item in value.items())
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


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
TABLE_PATH = Path(__file__).parent.parent / "config_keys.toml"
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


def load_table() -> tuple[ConfigKeys, ConfigKeys, ConfigKeys, ConfigKeys]:
    """The broker keys, the topic keys, the group keys (Kafka 4's GroupConfig) and a client
    metrics subscription's keys (ClientMetricsConfigs, KIP-714) of the config table, parsed
    once."""
    table = _load()
    broker, topic, group, client_metrics = (
        tuple(map(_row, table[kind])) for kind in ("broker", "topic", "group", "client_metrics")
    )
    return broker, topic, group, client_metrics


BROKER_KEYS, TOPIC_KEYS, GROUP_KEYS, CLIENT_METRICS_KEYS = load_table()
KEYS: Mapping[str, ConfigKey] = {key.name: key for key in BROKER_KEYS}
