"""The client telemetry plugin API (KIP-714; Kafka's ClientTelemetry, ClientTelemetryReceiver and
ClientTelemetryPayload): a class named in `metric.reporters` whose `client_receiver()` gets
every metrics payload a client pushes and the broker accepts. See docs/plugins.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from krust.config.errors import ConfigError
from krust.plugins.authorizer import AuthorizableRequestContext
from krust.plugins.loading import load_plugin

METRIC_REPORTERS_KEY = "metric.reporters"
# OTLP's protobuf encoding: what every payload holds (Kafka's ClientTelemetryPayload.contentType).
OTLP_PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ClientTelemetryPayload:
    """One accepted push: the client instance, whether it is its last (the client is closing),
    and the metrics as an uncompressed OTLP `MetricsData` protobuf."""

    client_instance_id: uuid.UUID
    is_terminating: bool
    data: bytes
    content_type: str = OTLP_PROTOBUF


@runtime_checkable
class ClientTelemetryReceiver(Protocol):
    """Receives the metrics clients push. Called on the broker's services event loop: return
    quickly (hand slow work to a thread). An exception answers the push INVALID_RECORD, which
    tells the client to stop pushing, as Kafka does."""

    def export_metrics(
        self, context: AuthorizableRequestContext, payload: ClientTelemetryPayload
    ) -> None: ...


@runtime_checkable
class ClientTelemetry(Protocol):
    """A metric reporter that wants client metrics (Kafka's ClientTelemetry): `configure`, if
    it has one, gets the broker's configs first."""

    def client_receiver(self) -> ClientTelemetryReceiver: ...


def load_receivers(
    specs: Sequence[str], configs: Mapping[str, str]
) -> list[ClientTelemetryReceiver]:
    """The receivers of the classes listed in `metric.reporters`; ConfigError (exit 2 at
    start-up) for a class that cannot be loaded or does not implement ClientTelemetry."""
    receivers = []
    for spec in specs:
        reporter = load_plugin(METRIC_REPORTERS_KEY, spec, configs)
        if not isinstance(reporter, ClientTelemetry):
            raise ConfigError(
                METRIC_REPORTERS_KEY,
                f"{spec} has no client_receiver(): krust's metric reporters implement "
                "krust.plugins.ClientTelemetry",
            )
        receivers.append(reporter.client_receiver())
    return receivers
