"""The public plugin API: what users implement (authorizer, SASL/PLAIN and client quota callbacks),
loaded by config name (`load_plugin`) and run contained (`PluginRunner`; docs/plugins.md).
Not here: the broker's services that use the plugins (krust.security)."""

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
