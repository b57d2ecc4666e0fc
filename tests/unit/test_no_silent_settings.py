"""No setting is silently ignored: every key the config table accepts is either honoured, with a
named test showing it act (`honoured_by`), or refused (`refused`): any value but its default
fails at start-up and in the admin APIs with a message naming the key. See docs/config.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from krust.config.broker import load_config
from krust.config.errors import ConfigError
from krust.config.table import (
    BROKER_KEYS,
    CLIENT_METRICS_KEYS,
    GROUP_KEYS,
    INT_MAX,
    LONG_MAX,
    TOPIC_KEYS,
    ConfigKey,
    ConfigType,
)
from krust.controller.broker_configs import EffectiveBrokerConfig
from krust.controller.configs import ConfigAdmin, OpType, ResourceType
from krust.controller.controller import Controller
from krust.controller.topic_configs import TopicConfigError, validate_topic_configs

from .conftest import FakeCore, LoopRunner
from .test_config_admin import incremental
from .test_controller import make_config

REPO = Path(__file__).resolve().parents[2]

# A broker key that is a topic key's default acts through that topic key: the core re-applies
# it to every topic without an override (test_a_broker_default_becomes_its_topic_keys_default).
TOPIC_KEY_OF_BROKER_DEFAULT = {name: key for key in TOPIC_KEYS for name in key.synonyms}
BROKER_BY_NAME = {key.name: key for key in BROKER_KEYS}

# Values the generic rule below cannot make.
NON_DEFAULT = {
    "follower.replication.throttled.replicas": "*",
    "leader.replication.throttled.replicas": "*",
    "share.auto.offset.reset": "earliest",
    "log.roll.jitter.ms": "1000",
    "log.cleaner.min.cleanable.ratio": "0.7",
    "min.cleanable.dirty.ratio": "0.7",
    "ssl.key.password": "secret",
    "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;",
    "sasl.server.callback.handler.class": "plugins:Callback",
    "controller.quorum.bootstrap.servers": "localhost:9093",
}
_MAX = {ConfigType.SHORT: 2**15 - 1, ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX}
# Broker keys that derive a topic default through a unit.
_FACTORS = {"hours": 3_600_000, "minutes": 60_000}


def non_default(key: ConfigKey) -> str:
    """A valid value of `key` other than its default."""
    if key.name in NON_DEFAULT:
        return NON_DEFAULT[key.name]
    if key.type is ConfigType.BOOLEAN:
        return "false" if key.default == "true" else "true"
    if key.choices:
        return next(choice for choice in key.choices if choice != key.default)
    base = int(key.default) if key.default not in (None, "") else int(key.min or 0)
    value = base + 1 if base < _MAX[key.type] else base - 1
    return str(value)


def all_keys() -> list[tuple[str, ConfigKey]]:
    return (
        [("broker", key) for key in BROKER_KEYS]
        + [("topic", key) for key in TOPIC_KEYS]
        + [("group", key) for key in GROUP_KEYS]
        + [("client_metrics", key) for key in CLIENT_METRICS_KEYS]
    )


def test_every_key_is_honoured_refused_or_being_implemented() -> None:
    unproven = []
    for kind, key in all_keys():
        if key.honoured_by and key.refused:
            unproven.append(f"{kind} {key.name}: both honoured_by and refused")
        elif (
            key.honoured_by
            or key.refused
            or (kind == "broker" and key.name in TOPIC_KEY_OF_BROKER_DEFAULT)
        ):
            continue
        else:
            unproven.append(f"{kind} {key.name}: neither honoured_by nor refused")
    assert unproven == []


def test_a_broker_default_is_refused_when_its_topic_key_is() -> None:
    for name, topic_key in TOPIC_KEY_OF_BROKER_DEFAULT.items():
        assert bool(topic_key.refused) == bool(BROKER_BY_NAME[name].refused), name


def _python_test_exists(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    *classes, function = name.split("::")
    scope: list[ast.stmt] = tree.body
    for class_name in classes:
        found = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not found:
            return False
        scope = found[0].body
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
        for node in scope
    )


def _rust_test_exists(path: Path, name: str) -> bool:
    attributes = r"(?:#\[[^\]]*\]\s*)*"
    pattern = rf"#\[(?:tokio::)?test[^\]]*\]\s*{attributes}(?:async\s+)?fn\s+{re.escape(name)}\s*\("
    return re.search(pattern, path.read_text()) is not None


@pytest.mark.parametrize(
    "evidence", sorted({key.honoured_by for _, key in all_keys() if key.honoured_by})
)
def test_each_honoured_by_names_an_existing_test(evidence: str) -> None:
    file, sep, name = evidence.partition("::")
    path = REPO / file
    assert sep and path.is_file(), evidence
    exists = _rust_test_exists if path.suffix == ".rs" else _python_test_exists
    assert exists(path, name), f"{evidence}: no such test"


def _expected_topic_default(broker_key: str, raw: str) -> str:
    factor = next((f for unit, f in _FACTORS.items() if broker_key.endswith(unit)), 1)
    return str(int(raw) * factor) if factor != 1 else raw


@pytest.mark.parametrize(
    "broker_key",
    sorted(name for name in TOPIC_KEY_OF_BROKER_DEFAULT if not BROKER_BY_NAME[name].refused),
)
def test_a_broker_default_becomes_its_topic_keys_default(broker_key: str, tmp_path: Path) -> None:
    raw = non_default(BROKER_BY_NAME[broker_key])
    config = load_config(None, {}, [f"log.dirs={tmp_path}", f"{broker_key}={raw}"])
    topic_key = TOPIC_KEY_OF_BROKER_DEFAULT[broker_key].name
    defaults = EffectiveBrokerConfig(config).topic_defaults()
    assert defaults[topic_key] == _expected_topic_default(broker_key, raw)


@pytest.mark.parametrize("key", [k for k in BROKER_KEYS if k.refused], ids=lambda k: k.name)
def test_each_refused_broker_key_stops_start_up(key: ConfigKey, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {}, [f"log.dirs={tmp_path}", f"{key.name}={non_default(key)}"])
    assert caught.value.key == key.name
    assert key.refused is not None and key.refused in str(caught.value)
    # Its default is still accepted, so a Kafka server.properties with it starts.
    if key.default is not None:
        load_config(None, {}, [f"log.dirs={tmp_path}", f"{key.name}={key.default}"])


@pytest.mark.parametrize("key", [k for k in TOPIC_KEYS if k.refused], ids=lambda k: k.name)
def test_each_refused_topic_key_is_refused_by_create_and_alter(
    key: ConfigKey, tmp_path: Path
) -> None:
    config = load_config(None, {}, [f"log.dirs={tmp_path}"])
    with pytest.raises(TopicConfigError) as caught:
        validate_topic_configs({key.name: non_default(key)}, config)
    assert f"configuration {key.name}:" in str(caught.value)
    validate_topic_configs({key.name: key.default or ""}, config)


@pytest.fixture
def admin(tmp_path: Path, fake_core: FakeCore) -> ConfigAdmin:
    return ConfigAdmin(Controller.open(make_config([tmp_path]), fake_core))


@pytest.mark.parametrize("key", [k for k in GROUP_KEYS if k.refused], ids=lambda k: k.name)
def test_each_refused_group_key_is_refused_by_the_admin_api(
    key: ConfigKey, run: LoopRunner, admin: ConfigAdmin
) -> None:
    error, message = incremental(
        run, admin, ResourceType.GROUP, "g", (key.name, non_default(key), OpType.SET)
    )
    assert error is ErrorCode.invalid_config
    assert message is not None and key.name in message
