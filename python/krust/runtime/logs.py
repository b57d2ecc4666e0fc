"""The broker's log output: the Rust core's and Python's lines in one shape on stderr.

`krust.log.format` picks text (`<time>  INFO <target>: <message>`, as tracing prints) or JSON
lines (`{"timestamp", "level", "message", "target"}`, as tracing's flattened JSON prints);
`krust.log.level` is a tracing EnvFilter (`info,krust.group=debug,kafka.request.logger=debug`)
that sets the core's levels and, for directives naming a Python logger, Python's. See
docs/logging.md.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

from krust.config.broker import ENV_PREFIX, BrokerConfig, ConfigSource
from krust.config.errors import ConfigError

LEVEL_KEY = "krust.log.level"
FORMAT_KEY = "krust.log.format"
# tracing's variable, read when krust.log.level is not set in any source.
LEGACY_LEVEL_ENV = f"{ENV_PREFIX}LOG"
TRACE = 5
# tracing's level names and Python's numbers ("off" silences everything).
_LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}


def _tracing_level(levelno: int) -> str:
    """tracing's name for a Python level: TRACE, DEBUG, INFO, WARN or ERROR."""
    if levelno <= TRACE:
        return "TRACE"
    if levelno <= logging.DEBUG:
        return "DEBUG"
    if levelno <= logging.INFO:
        return "INFO"
    return "WARN" if levelno <= logging.WARNING else "ERROR"


def _timestamp(created: float) -> str:
    """RFC 3339 in UTC with microseconds, as tracing-subscriber writes it."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1_000_000):06d}Z"


class TextFormatter(logging.Formatter):
    """`2026-01-02T03:04:05.123456Z  INFO krust.group: message`, tracing's text layout."""

    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"{_timestamp(record.created)} {_tracing_level(record.levelno):>5} "
            f"{record.name}: {record.getMessage()}"
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line with tracing's flattened fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": _timestamp(record.created),
            "level": _tracing_level(record.levelno),
            "message": record.getMessage(),
            "target": record.name,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def python_levels(levels: str) -> tuple[int, dict[str, int]]:
    """The default level and the per-logger levels an EnvFilter string sets (its span and
    field filters do not apply to Python and are left out); ValueError on an unknown level."""
    default = logging.ERROR
    per_logger: dict[str, int] = {}
    for directive in filter(None, (part.strip() for part in levels.split(","))):
        target, sep, level = directive.rpartition("=")
        target = target.split("[", 1)[0]
        name = level.strip().lower()
        if not sep and name not in _LEVELS:
            per_logger[directive.split("[", 1)[0]] = TRACE  # a bare target: everything
            continue
        if name not in _LEVELS:
            raise ValueError(f"unknown level {level!r} in {directive!r}")
        if target:
            per_logger[target] = _LEVELS[name]
        else:
            default = _LEVELS[name]
    return default, per_logger


def level_filter(config: BrokerConfig, env: Mapping[str, str]) -> str:
    """krust.log.level, or KRUST_LOG when no source set the key."""
    legacy = env.get(LEGACY_LEVEL_ENV)
    if legacy and config.source(LEVEL_KEY) is ConfigSource.DEFAULT:
        return legacy
    return str(config[LEVEL_KEY])


def configure(config: BrokerConfig, env: Mapping[str, str]) -> None:
    """Set up both languages' logging from the config; ConfigError names a bad key."""
    from krust import _core  # the extension; imported here so config needs it not

    levels = level_filter(config, env)
    log_format = str(config[FORMAT_KEY])
    try:
        default, per_logger = python_levels(levels)
        _core.configure_logging(levels, log_format)
    except ValueError as error:
        raise ConfigError(LEVEL_KEY, f"invalid value {levels!r}: {error}") from None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(default)
    for name, level in per_logger.items():
        logging.getLogger(name).setLevel(level)
