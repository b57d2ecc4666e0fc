"""SASL/PLAIN credentials checked by Python callbacks (docs/security.md).

The core authenticates SASL connections itself; on a listener whose PLAIN credentials come
from `listener.name.<listener>.plain.sasl.server.callback.handler.class`, it asks Python with
an internal SaslAuthenticate request carrying the client's PLAIN message. The callback runs on
its own thread through PluginRunner: a callback that raises, answers anything but True, or is
slower than PLAIN_CALLBACK_TIMEOUT_S refuses the connection, and the broker goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from krust.bridge.context import BrokerContext
from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.config.configured_plugins import plain_callback_specs
from krust.config.errors import ConfigError
from krust.plugins import PlainServerCallback, PluginContext, PluginRunner, load_plugin

SASL_AUTHENTICATE = 36
PLAIN_CALLBACK_TIMEOUT_S = 5.0
INVALID = "Authentication failed: Invalid username or password"


@dataclass(frozen=True)
class _Callback:
    plugin: PlainServerCallback
    runner: PluginRunner


def callback_key(listener: str) -> str:
    return f"listener.name.{listener.lower()}.plain.sasl.server.callback.handler.class"


class PlainCallbacks:
    """The PLAIN callback of each listener that has one."""

    def __init__(self, callbacks: Mapping[str, _Callback]) -> None:
        self._callbacks = dict(callbacks)

    async def authenticate(self, request: Any, context: RequestContext) -> Any:
        callback = self._callbacks.get(context.listener_name)
        if not context.internal or callback is None:
            return self._answer(context, ErrorCode.illegal_sasl_state, "Unexpected request")
        parts = bytes(request.auth_bytes).split(b"\0")
        if len(parts) != 3:
            return self._answer(context, ErrorCode.sasl_authentication_failed, INVALID)
        try:
            username, password = parts[1].decode(), parts[2].decode()
        except UnicodeDecodeError:
            return self._answer(context, ErrorCode.sasl_authentication_failed, INVALID)
        valid = await asyncio.to_thread(
            callback.runner.call,
            "authenticate",
            False,
            callback.plugin.authenticate,
            username,
            password,
        )
        if valid is True:
            return self._answer(context, ErrorCode.none, None)
        return self._answer(context, ErrorCode.sasl_authentication_failed, INVALID)

    @staticmethod
    def _answer(context: RequestContext, error: ErrorCode, message: str | None) -> Any:
        fields = {"error_code": error, "error_message": message, "auth_bytes": b""}
        return make_response(SASL_AUTHENTICATE, context.api_version, fields)

    async def close(self) -> None:
        for callback in self._callbacks.values():
            close = getattr(callback.plugin, "close", None)
            await asyncio.to_thread(callback.runner.close, close)


def install(ctx: BrokerContext) -> PlainCallbacks:
    """Load each listener's PLAIN callback (a class that fails to load stops start-up with
    exit 2) and serve the core's credential checks."""
    callbacks = {}
    for listener, spec in plain_callback_specs(ctx.config).items():
        key = callback_key(listener)
        plugin = load_plugin(key, spec, _plugin_configs(ctx.config, listener))
        if not isinstance(plugin, PlainServerCallback):
            raise ConfigError(key, f"{spec} has no authenticate(username, password) method")
        runner = PluginRunner(f"{listener}-plain-callback", PLAIN_CALLBACK_TIMEOUT_S)
        start = getattr(plugin, "start", None)
        if start is not None:
            image = ctx.controller.image
            runner.call("start", None, start, PluginContext(image.cluster_id, image.node_id))
        callbacks[listener] = _Callback(plugin, runner)
    service = PlainCallbacks(callbacks)
    if callbacks:
        ctx.dispatcher.register(
            SASL_AUTHENTICATE, 2, 2, service.authenticate, exposure=Exposure.INTERNAL
        )
    return service


def _plugin_configs(config: Mapping[str, Any], listener: str) -> dict[str, str]:
    """The broker's configs as strings, as Kafka passes them to a callback handler."""
    configs = {name: str(value) for name, value in config.items() if isinstance(value, str | int)}
    configs["listener.name"] = listener
    return configs
