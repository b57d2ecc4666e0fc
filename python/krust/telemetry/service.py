"""GetTelemetrySubscriptions (71) and PushTelemetry (72), v0 as Kafka 4.3 serves them: the
manager decides, the payload is decompressed by the core (the storage's codecs, bounded by
`telemetry.max.bytes`), exported to the metrics endpoint and handed to the `metric.reporters`
plugins (docs/metrics.md, docs/plugins.md).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.plugins.authorizer import AuthorizableRequestContext
from krust.plugins.containment import PluginRunner
from krust.plugins.telemetry import ClientTelemetryPayload, ClientTelemetryReceiver
from krust.telemetry import exposition
from krust.telemetry.manager import ACCEPTED_COMPRESSION_TYPES, ClientInfo, ClientMetricsManager

GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72
RECEIVER_TIMEOUT_S = 5.0
# How often instances that went quiet are forgotten (and their series leave the endpoint).
SWEEP_INTERVAL_S = 10.0
log = logging.getLogger(__name__)

Decompress = Callable[[int, bytes, int], bytes]
"""(compression type, payload, max bytes) -> the payload decompressed (krust._core's)."""


def client_info(context: RequestContext) -> ClientInfo:
    return ClientInfo(
        client_id=context.client_id or "",
        software_name=context.client_software_name,
        software_version=context.client_software_version,
        source_address=context.client_host,
        source_port=context.client_port,
    )


def _plugin_context(context: RequestContext) -> AuthorizableRequestContext:
    return AuthorizableRequestContext(
        principal=context.principal,
        listener_name=context.listener_name,
        security_protocol=context.security_protocol,
        client_address=context.client_host,
        client_id=context.client_id,
        request_type=context.api_key,
        request_version=context.api_version,
    )


class ClientTelemetryService:
    """The two telemetry apis over one ClientMetricsManager."""

    def __init__(
        self,
        manager: ClientMetricsManager,
        subscriptions: Callable[[], Any],
        decompress: Decompress,
        publish: Callable[[str], None],
        receivers: Sequence[ClientTelemetryReceiver] = (),
    ) -> None:
        self.manager = manager
        self._subscriptions = subscriptions
        self._decompress = decompress
        self._publish = publish
        self._receivers = [
            (receiver, PluginRunner(f"metric-reporter-{index}", RECEIVER_TIMEOUT_S))
            for index, receiver in enumerate(receivers)
        ]
        self._series: dict[uuid.UUID, exposition.ClientSeries] = {}
        # Kafka's ClientMetricsStats meters, as counts.
        self._counts = dict.fromkeys(
            ("unknown_subscription_request", "throttle", "plugin_export", "plugin_error"), 0
        )
        self._sweeper: asyncio.Task[None] | None = None

    def forget(self, instance_id: uuid.UUID) -> None:
        """An instance expired: its series leave the endpoint (Kafka unregisters its metrics)."""
        self._series.pop(instance_id, None)
        self._publish_all()

    def _publish_all(self) -> None:
        """Hand the core the endpoint's text: the manager's stats, then what clients pushed."""
        stats = exposition.render_manager_stats(self.manager.instance_count, self._counts)
        self._publish(stats + exposition.render(self._series.values()))

    def _count(self, error: ErrorCode) -> None:
        if error is ErrorCode.throttling_quota_exceeded:
            self._counts["throttle"] += 1
        elif error is ErrorCode.unknown_subscription_id:
            self._counts["unknown_subscription_request"] += 1

    async def get_telemetry_subscriptions(self, request: Any, context: RequestContext) -> Any:
        self.manager.update_subscriptions(self._subscriptions())
        answer = self.manager.get_subscriptions(request.client_instance_id, client_info(context))
        fields: dict[str, Any] = {"error_code": answer.error}
        instance = answer.instance
        if instance is not None:
            fields.update(
                client_instance_id=instance.instance_id,
                subscription_id=instance.subscription_id,
                accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
                push_interval=instance.push_interval_ms,
                telemetry_max_bytes=self.manager.telemetry_max_bytes,
                delta_temporality=True,
                requested_metrics=list(instance.metrics),
            )
        self._count(answer.error)
        self._publish_all()
        return make_response(GET_TELEMETRY_SUBSCRIPTIONS, context.api_version, fields)

    async def push_telemetry(self, request: Any, context: RequestContext) -> Any:
        self.manager.update_subscriptions(self._subscriptions())
        error, instance = self.manager.check_push(
            request.client_instance_id,
            request.subscription_id,
            request.terminating,
            request.compression_type,
            len(request.metrics),
            client_info(context),
        )
        self._count(error)
        if error is ErrorCode.none and instance is not None and request.metrics:
            error = await self._export(instance.instance_id, request, context)
            instance.last_error = error
            self._counts["plugin_export" if error is ErrorCode.none else "plugin_error"] += 1
        self._publish_all()
        return make_response(PUSH_TELEMETRY, context.api_version, {"error_code": error})

    async def _export(self, instance_id: uuid.UUID, request: Any, context: RequestContext) -> Any:
        """Decompress, decode, publish and hand to the plugins: TELEMETRY_TOO_LARGE past
        telemetry.max.bytes decompressed, INVALID_RECORD for a payload that is not OTLP or a
        plugin that fails (as Kafka answers an exporter's failure)."""
        try:
            data = self._decompress(
                request.compression_type, request.metrics, self.manager.telemetry_max_bytes
            )
        except OverflowError:
            return ErrorCode.telemetry_too_large
        except ValueError as error:
            log.warning(
                "client instance %s pushed metrics that do not decompress: %s", instance_id, error
            )
            return ErrorCode.invalid_record
        try:
            metrics = exposition.decode(data)
        except exposition.MalformedMetrics as error:
            log.warning("client instance %s pushed %s", instance_id, error)
            return ErrorCode.invalid_record
        series = self._series.get(instance_id)
        if series is None:
            instance = self.manager.instance(instance_id)
            client = instance.client if instance is not None else client_info(context)
            series = self._series[instance_id] = exposition.ClientSeries(
                {
                    "client_instance_id": str(instance_id),
                    "client_id": client.client_id,
                    "client_software_name": client.software_name,
                    "client_software_version": client.software_version,
                }
            )
        series.update(metrics)
        payload = ClientTelemetryPayload(instance_id, bool(request.terminating), data)
        plugin_context = _plugin_context(context)
        for receiver, runner in self._receivers:
            exported = asyncio.wrap_future(
                runner.submit(receiver.export_metrics, plugin_context, payload)
            )
            try:
                await asyncio.wait_for(exported, RECEIVER_TIMEOUT_S)
            except Exception as error:  # a plugin's failure is the client's INVALID_RECORD
                log.error(
                    "metric reporter %s failed to export client metrics: %r",
                    type(receiver).__name__,
                    error,
                )
                return ErrorCode.invalid_record
        return ErrorCode.none

    def start_sweeping(self) -> None:
        """On the services' loop: publish the stats, then forget quiet instances every
        SWEEP_INTERVAL_S."""
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        self._publish_all()  # the stats are on the endpoint before the first client asks

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            self.manager.expire()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for receiver, runner in self._receivers:
            runner.close(getattr(receiver, "close", None))
