"""What clients push, in Prometheus' text format: each client instance's latest OTLP metrics
(decoded with `opentelemetry-proto`, the OpenTelemetry project's generated protobuf types),
rendered for the broker's metrics endpoint (docs/metrics.md, "Client metrics").

Names: the client's metric name with `org.apache.kafka.` replaced by `kafka_client_` (any other
name gets `kafka_client_` in front), every character Prometheus does not allow as `_`, so no
client can shadow a broker metric. Labels: `client_instance_id`, the broker's view of the
client (`client_id`, `client_software_name`, `client_software_version`), the OTLP resource's
attributes, then the data point's. Gauges and non-monotonic sums are gauges; monotonic sums are
counters (ending `_total`), with KIP-714's delta pushes added up per series. Histograms and
summaries reach the plugins only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.metrics.v1 import metrics_pb2

KAFKA_PREFIX = "org.apache.kafka."
NAME_PREFIX = "kafka_client_"
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")
_DELTA = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA

Labels = tuple[tuple[str, str], ...]


class MalformedMetrics(ValueError):
    """A payload that is not an OTLP MetricsData protobuf."""


def metric_name(otlp_name: str) -> str:
    name = otlp_name[len(KAFKA_PREFIX) :] if otlp_name.startswith(KAFKA_PREFIX) else otlp_name
    return NAME_PREFIX + _NOT_NAME.sub("_", name)


def label_name(key: str) -> str:
    """A valid Prometheus label name (names starting `__` are Prometheus' own)."""
    name = _NOT_NAME.sub("_", key)
    if name.startswith("__"):
        name = "x" + name
    return name if name and not name[0].isdigit() else f"_{name}"


def _value_text(value: Any) -> str:
    """An OTLP AnyValue as a label value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    raw = getattr(value, kind)
    if kind == "bool_value":
        return "true" if raw else "false"
    if kind == "bytes_value":
        return bytes(raw).hex()
    if kind in ("array_value", "kvlist_value"):
        return str(raw).replace("\n", " ").strip()
    return str(raw)


def _attributes(attributes: Iterable[Any]) -> dict[str, str]:
    return {label_name(kv.key): _value_text(kv.value) for kv in attributes}


def _number(point: Any) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


@dataclass
class _Family:
    kind: str  # "gauge" or "counter"
    help: str
    samples: dict[Labels, float] = field(default_factory=dict)


def decode(data: bytes) -> Any:
    """The MetricsData of an uncompressed payload; MalformedMetrics if it is not one."""
    metrics = metrics_pb2.MetricsData()
    try:
        metrics.ParseFromString(data)
    except Exception as error:  # protobuf's DecodeError, or a RuntimeWarning-turned-error
        raise MalformedMetrics(f"not an OTLP MetricsData protobuf: {error}") from None
    return metrics


class ClientSeries:
    """One client instance's latest values, by Prometheus family name and labels."""

    def __init__(self, client_labels: Mapping[str, str]) -> None:
        self._client_labels = dict(client_labels)
        self.families: dict[str, _Family] = {}

    def update(self, metrics: Any) -> None:
        """Take one push: it replaces the instance's series (so what one instance keeps is
        bounded by one payload, telemetry.max.bytes), a delta sum adding to its series' value
        of the push before."""
        before, self.families = self.families, {}
        for resource_metrics in metrics.resource_metrics:
            resource = _attributes(resource_metrics.resource.attributes)
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    self._update_metric(metric, resource, before)

    def _update_metric(
        self, metric: Any, resource: Mapping[str, str], before: Mapping[str, _Family]
    ) -> None:
        kind = metric.WhichOneof("data")
        if kind == "gauge":
            points, family_kind, delta = metric.gauge.data_points, "gauge", False
        elif kind == "sum":
            monotonic = metric.sum.is_monotonic
            points, family_kind = metric.sum.data_points, "counter" if monotonic else "gauge"
            delta = metric.sum.aggregation_temporality == _DELTA
        else:
            return
        name = metric_name(metric.name)
        if family_kind == "counter" and not name.endswith("_total"):
            name += "_total"
        family = self.families.get(name)
        if family is None or family.kind != family_kind:
            family = self.families[name] = _Family(family_kind, metric.description)
        previous = before.get(name)
        carried = previous.samples if previous is not None and previous.kind == family_kind else {}
        for point in points:
            labels = {**self._client_labels, **resource, **_attributes(point.attributes)}
            labels["client_instance_id"] = self._client_labels["client_instance_id"]
            key = tuple(sorted(labels.items()))
            value = _number(point)
            if delta:
                value += carried.get(key, 0.0)
            family.samples[key] = value


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value) if not value.is_integer() or abs(value) >= 1e15 else str(int(value))


def render_manager_stats(instance_count: int, counts: Mapping[str, int]) -> str:
    """Kafka's ClientMetricsStats (`kafka.server:type=client-metrics`): the instances kept, and
    per event (`unknown_subscription_request`, `throttle`, `plugin_export`, `plugin_error`) a
    counter as Kafka's meters' `-count`."""
    prefix = "kafka_server_client_metrics_"
    lines = [
        f"# HELP {prefix}instance_count Client instances the broker keeps (KIP-714).",
        f"# TYPE {prefix}instance_count gauge",
        f"{prefix}instance_count {instance_count}",
    ]
    for event, count in sorted(counts.items()):
        lines.append(f"# HELP {prefix}{event}_total Client metrics {event} events.")
        lines.append(f"# TYPE {prefix}{event}_total counter")
        lines.append(f"{prefix}{event}_total {count}")
    return "\n".join(lines) + "\n"


def render(clients: Iterable[ClientSeries]) -> str:
    """Every client's series, one block per family (HELP, TYPE, samples), in name order."""
    merged: dict[str, _Family] = {}
    for client in clients:
        for name, family in client.families.items():
            into = merged.setdefault(name, _Family(family.kind, family.help))
            if into.kind == family.kind:
                into.samples.update(family.samples)
    lines = []
    for name in sorted(merged):
        family = merged[name]
        lines.append(f"# HELP {name} {_escape_help(family.help or 'Pushed by clients (KIP-714).')}")
        lines.append(f"# TYPE {name} {family.kind}")
        for labels, value in sorted(family.samples.items()):
            text = ",".join(f'{key}="{_escape_label(item)}"' for key, item in labels)
            lines.append(f"{name}{{{text}}} {_format_value(value)}")
    return "\n".join(lines) + "\n" if lines else ""
