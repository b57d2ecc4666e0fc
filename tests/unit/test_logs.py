"""Log output settings: levels per module, the two formats, and the flags that set them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from krust.config.broker import load_config
from krust.runtime import logs
from krust.runtime.cli import build_parser, overrides

from .test_config import cli


def record(name: str, level: int, message: str) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, message, None, None)
    made.created = 1_700_000_000.25
    return made


def test_an_env_filter_gives_python_its_default_and_per_logger_levels() -> None:
    default, per_logger = logs.python_levels(
        "warn,krust.group=debug,krust_server::network[conn]=trace,kafka.request.logger"
    )
    assert default == logging.WARNING
    assert per_logger == {
        "krust.group": logging.DEBUG,
        "krust_server::network": logs.TRACE,
        "kafka.request.logger": logs.TRACE,
    }
    assert logs.python_levels("")[0] == logging.ERROR


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="loud"):
        logs.python_levels("info,krust=loud")


def test_text_lines_have_tracings_layout() -> None:
    line = logs.TextFormatter().format(record("krust.group", logging.WARNING, "late"))
    assert line == "2023-11-14T22:13:20.250000Z  WARN krust.group: late"


def test_json_lines_have_tracings_flattened_fields() -> None:
    line = logs.JsonFormatter().format(record("krust.bridge.dispatcher", logging.CRITICAL, "gone"))
    assert json.loads(line) == {
        "timestamp": "2023-11-14T22:13:20.250000Z",
        "level": "ERROR",
        "message": "gone",
        "target": "krust.bridge.dispatcher",
    }


def test_krust_log_applies_only_when_no_source_sets_the_level(tmp_path: Path) -> None:
    env = {"KRUST_LOG": "debug"}
    log_dir = f"log.dirs={tmp_path}"
    assert logs.level_filter(load_config(None, {}, [log_dir]), env) == "debug"
    chosen = load_config(None, {}, [log_dir, "krust.log.level=warn"])
    assert logs.level_filter(chosen, env) == "warn"


def test_the_flags_are_overrides_of_their_keys_and_win() -> None:
    args = build_parser().parse_args(
        ["--override", "krust.metrics.port=1", "--metrics-port", "9404", "--log-format", "json"]
    )
    assert overrides(args) == [
        "krust.metrics.port=1",
        "krust.metrics.port=9404",
        "krust.log.format=json",
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--metrics-port", "0"], "krust.metrics.port"),
        (["--metrics-port", "65536"], "krust.metrics.port"),
        (["--log-format", "xml"], "krust.log.format"),
        (["--log-level", "info,krust_server=loud"], "krust.log.level"),
        (["--log-level", "krust_server[=info"], "krust.log.level"),
    ],
)
def test_a_bad_flag_is_a_configuration_error(tmp_path: Path, args: list[str], named: str) -> None:
    result = cli("--override", f"log.dirs={tmp_path}", *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("krust-broker: configuration error:")
    assert named in result.stderr
