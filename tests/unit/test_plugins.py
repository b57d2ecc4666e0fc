"""Loading plugins by config name and containing the ones that fail or hang."""

from __future__ import annotations

import logging
import sys
import threading
import types
from collections.abc import Iterator, Mapping

import pytest
from krust.config.errors import ConfigError
from krust.plugins import PluginRunner, load_plugin


class Recorder:
    def __init__(self) -> None:
        self.configs: Mapping[str, str] = {}

    def configure(self, configs: Mapping[str, str]) -> None:
        self.configs = configs


class FailsToConfigure:
    def configure(self, configs: Mapping[str, str]) -> None:
        raise ValueError("tenant.prefix is missing")


@pytest.fixture
def plugin_module() -> Iterator[str]:
    module = types.ModuleType("krust_test_plugins")
    module.Recorder = Recorder  # type: ignore[attr-defined]
    module.FailsToConfigure = FailsToConfigure  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


@pytest.mark.parametrize("separator", [":", "."])
def test_a_plugin_is_loaded_by_name_and_configured(plugin_module: str, separator: str) -> None:
    plugin = load_plugin("x.class", f"{plugin_module}{separator}Recorder", {"tenant": "a"})
    assert isinstance(plugin, Recorder)
    assert plugin.configs == {"tenant": "a"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_anywhere:Thing", "ModuleNotFoundError"),
        ("{module}:Missing", "AttributeError"),
        ("{module}:FailsToConfigure", "tenant.prefix is missing"),
        ("Lonely", "not a class name"),
    ],
)
def test_a_plugin_that_cannot_load_is_a_config_error_naming_key_and_class(
    plugin_module: str, spec: str, message: str
) -> None:
    spec = spec.format(module=plugin_module)
    with pytest.raises(ConfigError) as error:
        load_plugin("authorizer.class.name", spec, {})
    assert error.value.key == "authorizer.class.name"
    assert spec in str(error.value) and message in str(error.value)


def test_a_failing_plugin_call_gives_the_fallback_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = PluginRunner("tenant", timeout_s=5)

    def broken(_: int) -> bool:
        raise RuntimeError("database down")

    with caplog.at_level(logging.ERROR):
        assert [runner.call("authorize", False, broken, n) for n in range(3)] == [False] * 3
    assert runner.failures == 3
    errors = [r for r in caplog.records if "database down" in r.getMessage() or r.exc_info]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert runner.call("authorize", False, lambda n: n > 0, 1) is True
    runner.close()


def test_a_slow_plugin_call_times_out_to_the_fallback() -> None:
    runner = PluginRunner("slow", timeout_s=0.05)
    release = threading.Event()
    assert runner.call("authorize", "denied", lambda: release.wait(10) and "allowed") == "denied"
    assert runner.failures == 1
    release.set()
    runner.close()


def test_calls_run_on_the_plugins_own_thread() -> None:
    runner = PluginRunner("where", timeout_s=5)
    name = runner.call("where", "", lambda: threading.current_thread().name)
    assert name.startswith("plugin-where") and name != threading.current_thread().name
    runner.close()
