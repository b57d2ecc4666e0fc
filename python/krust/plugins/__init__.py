"""Python plugins the broker loads by config name (docs/plugins.md).

A plugin is a plain class named `module:Class` in a config key (e.g. `authorizer.class.name`).
`load_plugin` imports and configures it; `PluginRunner` calls it on its own thread, with a
timeout, and contains its failures.
"""

from krust.plugins.authorizer import Authorizer
from krust.plugins.containment import PluginRunner
from krust.plugins.lifecycle import Plugin, PluginContext
from krust.plugins.loading import load_plugin
from krust.plugins.quota import ClientQuotaCallback, ClientQuotaType, QuotaCallbackContext
from krust.plugins.sasl import PlainServerCallback

__all__ = [
    "Authorizer",
    "ClientQuotaCallback",
    "ClientQuotaType",
    "PlainServerCallback",
    "Plugin",
    "PluginContext",
    "PluginRunner",
    "QuotaCallbackContext",
    "load_plugin",
]
