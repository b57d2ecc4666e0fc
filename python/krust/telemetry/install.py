"""Installs the client telemetry apis with the `metric.reporters` plugins (a plugin that cannot
load stops start-up with exit 2, like the other plugins; docs/plugins.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from krust.config.configured_plugins import client_telemetry_enabled, metric_reporter_specs
from krust.plugins.loading import plugin_configs
from krust.plugins.telemetry import load_receivers
from krust.telemetry.manager import ClientMetricsManager
from krust.telemetry.service import (
    GET_TELEMETRY_SUBSCRIPTIONS,
    PUSH_TELEMETRY,
    ClientTelemetryService,
)

if TYPE_CHECKING:
    from krust.bridge.context import BrokerContext


def _decompress(compression_type: int, data: bytes, max_bytes: int) -> bytes:
    from krust import _core  # the extension, imported at the first push

    return _core.decompress_telemetry(compression_type, data, max_bytes)


def install(ctx: BrokerContext) -> ClientTelemetryService | None:
    """Route GetTelemetrySubscriptions and PushTelemetry (v0, as Kafka 4.3) to a service, if
    pushed metrics go somewhere (else the apis are not advertised, as in Kafka)."""
    config = ctx.config
    if not client_telemetry_enabled(config):
        return None
    originals_of = getattr(config, "originals", None)
    originals = originals_of() if callable(originals_of) else {}
    receivers = load_receivers(
        metric_reporter_specs(config), plugin_configs(dict(config), originals)
    )
    controller = ctx.controller
    forget: list[ClientTelemetryService] = []
    manager = ClientMetricsManager(
        int(config["telemetry.max.bytes"]),
        on_expired=lambda instance_id: forget[0].forget(instance_id) if forget else None,
    )
    service = ClientTelemetryService(
        manager,
        lambda: controller.image.client_metrics,
        _decompress,
        ctx.core.set_client_telemetry_metrics,
        receivers,
    )
    forget.append(service)
    ctx.dispatcher.register(GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, service.get_telemetry_subscriptions)
    ctx.dispatcher.register(PUSH_TELEMETRY, 0, 0, service.push_telemetry)
    ctx.dispatcher.loop.call_soon_threadsafe(service.start_sweeping)
    return service
