"""Runs `client.quota.callback.class`: the core queues each new (principal, client id) it meters;
this service's thread asks the callback (on the plugin's own thread, with a timeout) and hands
the answers back to the core, which applies them from then on. The produce/fetch path never
waits for Python: until the answer arrives, a new client is metered without a limit.

A callback that raises or times out counts as "unlimited" for that client and is logged once
with its traceback (PluginRunner). See docs/plugins.md and docs/quotas.md."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from krust.bridge.context import BrokerContext
from krust.config.configured_plugins import QUOTA_CALLBACK_KEY, quota_callback_spec
from krust.config.errors import ConfigError
from krust.config.table import config_string
from krust.plugins import PluginRunner, load_plugin
from krust.plugins.quota import ClientQuotaCallback, ClientQuotaType, QuotaCallbackContext

CALLBACK_KEY = QUOTA_CALLBACK_KEY
# How long one callback call may take before its client is left unlimited.
CALLBACK_TIMEOUT_S = 5.0
# How often the service thread looks up from waiting, to notice shutdown.
POLL_S = 0.5
log = logging.getLogger(__name__)

Limits = tuple[float | None, float | None, float | None]
UNLIMITED: Limits = (None, None, None)


class QuotaCallbackCore(Protocol):
    """The part of `krust._core.Core` the service uses."""

    def use_quota_callback(self) -> None: ...
    def take_unresolved_quota_clients(self, timeout_s: float) -> list[tuple[str, str]]: ...
    def set_quota_callback_limits(
        self, limits: Sequence[tuple[tuple[str, str], Limits]]
    ) -> None: ...
    def reset_quota_callback_limits(self) -> None: ...


def load_callback(config: Mapping[str, Any]) -> ClientQuotaCallback | None:
    """The configured callback, imported and configured; None when none is configured.
    Raises ConfigError (exit status 2) when it cannot be loaded or is not a callback."""
    spec = quota_callback_spec(config)
    if not spec:
        return None
    configs = {name: config_string(value) for name, value in config.items() if value is not None}
    plugin = load_plugin(CALLBACK_KEY, spec, configs)
    if not callable(getattr(plugin, "quota_limit", None)):
        raise ConfigError(CALLBACK_KEY, f"{spec} has no quota_limit method")
    return plugin  # type: ignore[return-value]


class QuotaCallbackService:
    """Feeds the core's unresolved clients to the callback until closed."""

    def __init__(
        self,
        callback: ClientQuotaCallback,
        core: QuotaCallbackCore,
        cluster_id: str,
        node_id: int,
        timeout_s: float = CALLBACK_TIMEOUT_S,
    ) -> None:
        self._callback = callback
        self._core = core
        self._runner = PluginRunner(CALLBACK_KEY, timeout_s)
        self._stopped = threading.Event()
        context = QuotaCallbackContext(cluster_id, node_id, core.reset_quota_callback_limits)
        start = getattr(callback, "start", None)
        if start is not None:
            self._runner.call("start", None, start, context)
        core.use_quota_callback()
        self._thread = threading.Thread(target=self._run, name="krust-quota-callback", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            clients = self._core.take_unresolved_quota_clients(POLL_S)
            if clients:
                self._core.set_quota_callback_limits([(c, self.limits(*c)) for c in clients])

    def limits(self, user: str, client_id: str) -> Limits:
        """The callback's quotas of one client, asked in one call on the plugin's thread
        (unlimited where it has none, or when it fails)."""
        return self._runner.call("quota_limit", UNLIMITED, self._ask, f"User:{user}", client_id)

    def _ask(self, principal: str, client_id: str) -> Limits:
        ask = self._callback.quota_limit
        produce, fetch, request = (ask(kind, principal, client_id) for kind in ClientQuotaType)
        return produce, fetch, request

    async def close(self) -> None:
        self._stopped.set()
        self._thread.join(POLL_S * 4)
        self._runner.close(getattr(self._callback, "close", None))


def install(ctx: BrokerContext) -> QuotaCallbackService | None:
    """Start the configured quota callback, if any; ConfigError if it cannot be loaded."""
    callback = load_callback(ctx.config)
    if callback is None:
        return None
    core: Any = ctx.core
    image = ctx.controller.image
    return QuotaCallbackService(callback, core, image.cluster_id, image.node_id)
