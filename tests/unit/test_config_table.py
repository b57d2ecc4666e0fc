"""The config table (config_keys.toml) is the one source of broker and topic keys."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from krust.config.broker import load_config
from krust.config.errors import ConfigError
from krust.config.table import BROKER_KEYS, TABLE_PATH, TOPIC_KEYS, DynamicUpdateMode
from krust.controller.topic_configs import (
    TopicConfigError,
    effective_topic_configs,
    validate_topic_configs,
)


def raw_table() -> dict[str, Any]:
    with TABLE_PATH.open("rb") as file:
        return tomllib.load(file)


def test_the_core_hands_over_the_table_as_the_file_has_it() -> None:
    """Python reads the table the extension embeds: a stale build would show here."""
    from krust import _core

    assert _core.config_table() == raw_table()


def test_python_keys_are_the_table_rows() -> None:
    table = raw_table()
    assert [key.name for key in BROKER_KEYS] == [row["name"] for row in table["broker"]]
    assert [key.name for key in TOPIC_KEYS] == [row["name"] for row in table["topic"]]
    for key, row in zip(BROKER_KEYS + TOPIC_KEYS, table["broker"] + table["topic"], strict=True):
        assert (key.default, key.min, key.max) == (
            row.get("default"),
            row.get("min"),
            row.get("max"),
        )


def test_every_row_is_complete_and_its_default_valid() -> None:
    for key in BROKER_KEYS + TOPIC_KEYS:
        assert key.doc.strip(), key.name
        if key.default is not None:
            assert key.problem(key.default)[1] is None, key.name
        if key.kafka_min is not None:
            assert key.min is not None and key.min > key.kafka_min, key.name
            assert key.why, key.name
    assert all(isinstance(key.dynamic, DynamicUpdateMode) for key in BROKER_KEYS)
    assert all(key.dynamic is None for key in TOPIC_KEYS)


def test_a_topic_default_is_its_broker_synonyms_default(tmp_path: Any) -> None:
    config = load_config(None, {}, [f"log.dirs={tmp_path}"])
    effective = {c.name: c.value for c in effective_topic_configs({}, config)}
    for key in TOPIC_KEYS:
        if key.synonyms:
            assert effective[key.name] == key.default, key.name


def test_kafka_4_bounds_and_defaults() -> None:
    keys = {key.name: key for key in BROKER_KEYS + TOPIC_KEYS}
    # KIP-1030: segments of at least 1 MiB, future timestamps bounded to one hour.
    assert keys["segment.bytes"].min == keys["log.segment.bytes"].min == 1024 * 1024
    assert keys["message.timestamp.after.max.ms"].default == "3600000"
    assert keys["log.message.timestamp.after.max.ms"].default == "3600000"


def test_a_broker_below_the_1_mib_segment_is_refused(tmp_path: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {}, [f"log.dirs={tmp_path}", "log.segment.bytes=1000"])
    assert caught.value.key == "log.segment.bytes"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.index.bytes", "8"),
        ("segment.bytes", "1048575"),
        ("internal.segment.bytes", "0"),
        ("compression.lz4.level", "18"),
        ("cleanup.policy", "delete,shred"),
    ],
)
def test_a_bad_topic_value_names_the_key(name: str, value: str, tmp_path: Any) -> None:
    config = load_config(None, {}, [f"log.dirs={tmp_path}"])
    with pytest.raises(TopicConfigError) as caught:
        validate_topic_configs({name: value}, config)
    assert f"configuration {name}:" in str(caught.value)


def test_conflicting_compaction_lags_are_refused_with_the_broker_defaults(tmp_path: Any) -> None:
    config = load_config(
        None, {}, [f"log.dirs={tmp_path}", "log.cleaner.max.compaction.lag.ms=60000"]
    )
    validate_topic_configs({"min.compaction.lag.ms": "60000"}, config)
    with pytest.raises(TopicConfigError) as caught:
        validate_topic_configs({"min.compaction.lag.ms": "60001"}, config)
    assert "min.compaction.lag.ms (60001) > max.compaction.lag.ms (60000)" in str(caught.value)


def test_kafkas_internal_test_only_segment_size_is_accepted_but_not_described(
    tmp_path: Any,
) -> None:
    config = load_config(None, {}, [f"log.dirs={tmp_path}"])
    validate_topic_configs({"internal.segment.bytes": "1000"}, config)
    assert "internal.segment.bytes" not in {c.name for c in effective_topic_configs({}, config)}
