"""Which Python plugins a broker's config sets, read by the services that load them and by
start-up, which loads them before the port opens when any is set (docs/plugins.md,
docs/python-services.md "Start-up order"). Imports nothing of the plugins themselves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AUTHORIZER_KEY = "authorizer.class.name"
QUOTA_CALLBACK_KEY = "client.quota.callback.class"
METRIC_REPORTERS_KEY = "metric.reporters"


def authorizer_spec(config: Mapping[str, Any]) -> str:
    """`authorizer.class.name`, or "" for none."""
    return str(config.get(AUTHORIZER_KEY) or "").strip()


def quota_callback_spec(config: Mapping[str, Any]) -> str:
    """`client.quota.callback.class`, or "" for none."""
    return str(config.get(QUOTA_CALLBACK_KEY) or "").strip()


def plain_callback_specs(config: Mapping[str, Any]) -> dict[str, str]:
    """Each listener's SASL/PLAIN server callback class, by listener name."""
    return {
        listener: spec
        for listener, security in config["listener.security"].items()
        if (spec := (security["sasl"] or {}).get("plain_callback_class")) is not None
    }


def metric_reporter_specs(config: Mapping[str, Any]) -> list[str]:
    """`metric.reporters`: the client telemetry plugins (KIP-714), maybe none."""
    return [spec for spec in config.get(METRIC_REPORTERS_KEY) or [] if spec]


def client_telemetry_enabled(config: Mapping[str, Any]) -> bool:
    """Whether pushed client metrics (KIP-714) go somewhere: a `metric.reporters` plugin or the
    metrics endpoint (`krust.metrics.port`). Only then are the telemetry apis served."""
    return bool(metric_reporter_specs(config)) or config.get("krust.metrics.port") is not None


def any_configured(config: Mapping[str, Any]) -> bool:
    return bool(
        authorizer_spec(config)
        or quota_callback_spec(config)
        or plain_callback_specs(config)
        or metric_reporter_specs(config)
    )
