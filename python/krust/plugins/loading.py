"""Loading a plugin named `module:Class` by a config key."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from krust.config.errors import ConfigError


def load_plugin(key: str, spec: str, configs: Mapping[str, str]) -> object:
    """Import `module:Class` (or `module.Class`), instantiate it without arguments and call its
    `configure(configs)`. Any failure is a ConfigError naming the key and the class, which stops
    start-up with exit status 2."""
    module_name, _, class_name = spec.partition(":")
    if not class_name:
        module_name, _, class_name = spec.rpartition(".")
    if not module_name or not class_name:
        raise ConfigError(key, f"{spec!r} is not a class name of the form module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        plugin = cls()
        configure = getattr(plugin, "configure", None)
        if configure is not None:
            configure(dict(configs))
    except Exception as error:
        raise ConfigError(
            key, f"cannot load {spec}: {type(error).__name__}: {' '.join(str(error).split())}"
        ) from error
    return plugin


def plugin_configs(config: Mapping[str, object], originals: Mapping[str, str]) -> dict[str, str]:
    """What a plugin's `configure` gets: every broker config as Kafka writes it (booleans as
    true/false, lists comma-separated), then every key the broker was given, as given (the
    plugin's own keys included)."""

    def text(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list | tuple):
            return ",".join(text(item) for item in value)
        return str(value)

    configs = {key: text(value) for key, value in config.items() if value is not None}
    configs.update(originals)
    return configs
