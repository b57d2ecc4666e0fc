"""Client metrics (KIP-714) on a fake clock: subscriptions as Kafka validates and matches them,
instance and subscription ids, push intervals, the errors Kafka answers, and what reaches the
Prometheus text and the plugins."""

from __future__ import annotations

import asyncio
import gzip
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from krust import _core
from krust.bridge.dispatcher import RequestContext
from krust.controller.client_metrics_configs import (
    ClientMetricsConfigError,
    Selector,
    Subscription,
    validate,
)
from krust.plugins.authorizer import AuthorizableRequestContext
from krust.plugins.telemetry import ClientTelemetryPayload
from krust.telemetry import exposition
from krust.telemetry.manager import ClientInfo, ClientMetricsManager
from krust.telemetry.service import ClientTelemetryService
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

CLIENT = ClientInfo("producer-1", "librdkafka", "2.16.2", "10.0.0.7", 51234)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def _manager(subscriptions: dict[str, dict[str, str]], max_bytes: int = 1 << 20) -> Any:
    clock = Clock()
    manager = ClientMetricsManager(max_bytes, clock=clock)
    manager.update_subscriptions(subscriptions)
    return manager, clock


# Validation (Kafka's ClientMetricsConfigs.validate).


@pytest.mark.parametrize(
    ("configs", "invalid_config", "message"),
    [
        ({"nope": "1"}, False, "Unknown client metrics configuration: nope"),
        ({"interval.ms": "50"}, False, "interval must be between 100 and 3600000"),
        ({"interval.ms": "3600001"}, False, "interval must be between 100 and 3600000"),
        ({"interval.ms": "soon"}, True, "Not a number of type INT"),
        ({"metrics": "a,a"}, True, "values must not be duplicated"),
        ({"match": "client_colour=red"}, True, "Illegal client matching pattern"),
        ({"match": "client_id"}, True, "Illegal client matching pattern"),
        ({"match": "client_id=(unclosed"}, True, "is not a valid regular expression"),
    ],
)
def test_kafka_refuses_these_subscriptions(
    configs: dict[str, str], invalid_config: bool, message: str
) -> None:
    with pytest.raises(ClientMetricsConfigError) as refused:
        validate("sub", configs, {})
    assert refused.value.invalid_config is invalid_config
    assert message in str(refused.value)


def test_a_subscription_needs_a_name_and_accepts_kafkas_examples() -> None:
    with pytest.raises(ClientMetricsConfigError, match="Subscription name can't be empty"):
        validate("", {"interval.ms": "1000"}, {})
    validate(
        "sub",
        {
            "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
            "interval.ms": "100",
            "match": "client_software_name=librdkafka,client_id=foo=bar.*",
        },
        {},
    )


def test_subscriptions_match_on_every_client_selector() -> None:
    instance = uuid.uuid4()
    selectors = CLIENT.selectors(instance)

    def matches(match: str) -> bool:
        return Subscription.from_configs("s", {"match": match}).matches(selectors)

    assert matches("")  # no selector: every client
    assert matches("client_id=producer-.*")
    assert matches(f"client_instance_id={instance}")
    assert matches("client_software_name=librdkafka,client_software_version=2\\.16\\..*")
    assert matches("client_source_address=10\\.0\\.0\\.7,client_source_port=51234")
    assert not matches("client_id=producer")  # the whole value must match
    assert not matches("client_id=producer-.*,client_software_name=apache-kafka-java")
    assert Subscription.from_configs("s", {"match": "client_id=producer-.*"}).match.keys() == {
        Selector.CLIENT_ID
    }


# Instances, ids and intervals (Kafka's ClientMetricsManager).


def test_a_new_client_gets_an_instance_id_and_the_union_of_matching_subscriptions() -> None:
    manager, _clock = _manager(
        {
            "producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"},
            "fast": {
                "metrics": "org.apache.kafka.consumer.",
                "interval.ms": "500",
                "match": "client_id=producer-.*",
            },
            "others": {"metrics": "*", "interval.ms": "100", "match": "client_id=consumer-.*"},
        }
    )
    answer = manager.get_subscriptions(None, CLIENT)
    assert answer.error is ErrorCode.none
    instance = answer.instance
    assert instance.instance_id.int != 0
    assert instance.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert instance.push_interval_ms == 500


def test_a_star_subscribes_everything_and_no_match_subscribes_nothing() -> None:
    manager, _clock = _manager({"all": {"metrics": "a.,*", "match": "client_id=producer-1"}})
    assert manager.get_subscriptions(None, CLIENT).instance.metrics == ("*",)
    other = ClientInfo("someone", "x", "1", "10.0.0.8", 1)
    nothing = manager.get_subscriptions(None, other).instance
    assert (nothing.metrics, nothing.push_interval_ms) == ((), 300_000)


def test_asking_again_within_the_interval_is_throttled_unless_subscriptions_changed() -> None:
    manager, clock = _manager({"s": {"metrics": "*", "interval.ms": "1000"}})
    first = manager.get_subscriptions(None, CLIENT).instance
    again = manager.get_subscriptions(first.instance_id, CLIENT)
    assert again.error is ErrorCode.throttling_quota_exceeded
    clock.ms += 1000
    assert manager.get_subscriptions(first.instance_id, CLIENT).error is ErrorCode.none
    # A changed subscription re-evaluates the instance at once, with a new subscription id.
    manager.update_subscriptions({"s": {"metrics": "*", "interval.ms": "2000"}})
    changed = manager.get_subscriptions(first.instance_id, CLIENT)
    assert changed.error is ErrorCode.none
    assert changed.instance.subscription_id != first.subscription_id
    assert changed.instance.push_interval_ms == 2000


def test_pushes_follow_kafkas_checks_in_kafkas_order() -> None:
    manager, clock = _manager({"s": {"metrics": "*", "interval.ms": "1000"}})
    instance = manager.get_subscriptions(None, CLIENT).instance
    iid, sid = instance.instance_id, instance.subscription_id

    def push(**overrides: Any) -> ErrorCode:
        args = {"subscription": sid, "terminating": False, "compression": 0, "size": 10}
        args.update(overrides)
        error, _instance = manager.check_push(
            overrides.get("iid", iid),
            args["subscription"],
            args["terminating"],
            args["compression"],
            args["size"],
            CLIENT,
        )
        return error

    assert push(iid=None) is ErrorCode.invalid_request
    assert push(iid=uuid.UUID(int=1)) is ErrorCode.invalid_request
    assert push() is ErrorCode.none  # at once after GetTelemetrySubscriptions
    assert push() is ErrorCode.throttling_quota_exceeded  # before the interval
    clock.ms += 1000
    assert push(subscription=sid + 1) is ErrorCode.unknown_subscription_id
    clock.ms += 1000
    assert push(compression=9) is ErrorCode.unsupported_compression_type
    # Both errors let the client ask for its subscription again at once.
    assert manager.get_subscriptions(iid, CLIENT).error is ErrorCode.none
    clock.ms += 1000
    assert push(size=(1 << 20) + 1) is ErrorCode.telemetry_too_large
    clock.ms += 1000
    assert push(terminating=True) is ErrorCode.none
    assert push(terminating=True) is ErrorCode.invalid_request  # nothing after the last push


def test_quiet_instances_are_forgotten() -> None:
    forgotten: list[uuid.UUID] = []
    clock = Clock()
    manager = ClientMetricsManager(1 << 20, clock=clock, on_expired=forgotten.append)
    manager.update_subscriptions({"s": {"metrics": "*", "interval.ms": "100"}})
    iid = manager.get_subscriptions(None, CLIENT).instance.instance_id
    clock.ms += 59_999
    manager.expire()
    assert forgotten == []
    clock.ms += 1
    manager.expire()
    assert forgotten == [iid] and manager.instance(iid) is None


# The service: payloads, the Prometheus text and the plugins.


def _otlp() -> bytes:
    def kv(key: str, value: str) -> Any:
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))

    gauge = metrics_pb2.Metric(
        name="org.apache.kafka.producer.record.queue.time.avg",
        description="Average queue time.",
        gauge=metrics_pb2.Gauge(
            data_points=[
                metrics_pb2.NumberDataPoint(as_double=1.5, attributes=[kv("node.id", "1")])
            ]
        ),
    )
    counter = metrics_pb2.Metric(
        name="org.apache.kafka.producer.connection.creation.total",
        sum=metrics_pb2.Sum(
            is_monotonic=True,
            aggregation_temporality=metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA,
            data_points=[metrics_pb2.NumberDataPoint(as_int=2)],
        ),
    )
    data = metrics_pb2.MetricsData(
        resource_metrics=[
            metrics_pb2.ResourceMetrics(
                resource=resource_pb2.Resource(attributes=[kv("client_rack", "r1")]),
                scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[gauge, counter])],
            )
        ]
    )
    return data.SerializeToString()


class Receiver:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.received: list[tuple[AuthorizableRequestContext, ClientTelemetryPayload]] = []

    def export_metrics(
        self, context: AuthorizableRequestContext, payload: ClientTelemetryPayload
    ) -> None:
        if self.fail:
            raise RuntimeError("reporter down")
        self.received.append((context, payload))


def _service(receiver: Receiver, max_bytes: int = 1 << 20) -> Any:
    published: list[str] = []
    manager = ClientMetricsManager(max_bytes, clock=Clock())
    subscriptions = {"s": {"metrics": "*", "interval.ms": "100"}}
    service = ClientTelemetryService(
        manager, lambda: subscriptions, _core.decompress_telemetry, published.append, [receiver]
    )
    return service, published


CONTEXT = RequestContext(
    api_key=72,
    api_version=0,
    correlation_id=1,
    client_id="producer-1",
    client_host="10.0.0.7",
    client_port=51234,
    client_software_name="librdkafka",
    client_software_version="2.16.2",
)


def _push(service: Any, metrics: bytes, compression: int = 1, sid: int | None = None) -> Any:
    async def run() -> Any:
        get = await service.get_telemetry_subscriptions(
            SimpleNamespace(client_instance_id=None), CONTEXT
        )
        request = SimpleNamespace(
            client_instance_id=get.client_instance_id,
            subscription_id=get.subscription_id if sid is None else sid,
            terminating=False,
            compression_type=compression,
            metrics=metrics,
        )
        return get, await service.push_telemetry(request, CONTEXT)

    return asyncio.run(run())


def test_a_push_reaches_the_prometheus_text_and_the_plugin() -> None:
    receiver = Receiver()
    service, published = _service(receiver)
    get, push = _push(service, gzip.compress(_otlp()))
    assert get.error_code is ErrorCode.none
    assert list(get.accepted_compression_types) == [4, 3, 1, 2]
    assert get.delta_temporality and get.telemetry_max_bytes == 1 << 20
    assert push.error_code is ErrorCode.none
    text = published[-1]
    instance = str(get.client_instance_id)
    assert "# TYPE kafka_client_producer_record_queue_time_avg gauge" in text
    assert (
        'kafka_client_producer_record_queue_time_avg{client_id="producer-1",'
        f'client_instance_id="{instance}",client_rack="r1",client_software_name="librdkafka",'
        'client_software_version="2.16.2",node_id="1"} 1.5'
    ) in text
    assert "# TYPE kafka_client_producer_connection_creation_total counter" in text
    # Kafka's ClientMetricsStats come first.
    assert text.startswith("# HELP kafka_server_client_metrics_instance_count")
    assert "kafka_server_client_metrics_instance_count 1\n" in text
    assert "kafka_server_client_metrics_plugin_export_total 1\n" in text
    [(context, payload)] = receiver.received
    assert payload.client_instance_id == get.client_instance_id
    assert payload.data == _otlp() and not payload.is_terminating
    assert (context.client_id, context.request_type) == ("producer-1", 72)


def test_a_payload_past_telemetry_max_bytes_is_telemetry_too_large() -> None:
    payload = _otlp()
    # Compressed it fits; decompressed it does not.
    service, published = _service(Receiver(), max_bytes=len(payload) - 1)
    assert len(gzip.compress(payload)) < len(payload) - 1
    _get, push = _push(service, gzip.compress(payload))
    assert push.error_code is ErrorCode.telemetry_too_large
    assert "kafka_client_" not in published[-1]
    assert "kafka_server_client_metrics_plugin_error_total 1\n" in published[-1]


def test_garbage_and_failing_plugins_are_invalid_record() -> None:
    service, _published = _service(Receiver())
    _get, push = _push(service, b"not gzip")
    assert push.error_code is ErrorCode.invalid_record
    service, _published = _service(Receiver())
    _get, push = _push(service, gzip.compress(b"\xff\xff\xff not protobuf"))
    assert push.error_code is ErrorCode.invalid_record
    service, _published = _service(Receiver(fail=True))
    _get, push = _push(service, gzip.compress(_otlp()))
    assert push.error_code is ErrorCode.invalid_record


def test_delta_sums_add_up_and_a_push_replaces_the_instances_series() -> None:
    series = exposition.ClientSeries({"client_instance_id": "i", "client_id": "c"})
    series.update(exposition.decode(_otlp()))
    series.update(exposition.decode(_otlp()))
    text = exposition.render([series])
    # The delta counter (2 per push) added up; the gauge is the latest value.
    assert 'kafka_client_producer_connection_creation_total{client_id="c",' in text
    assert text.count(" 4\n") == 1 and " 1.5\n" in text
    series.update(metrics_pb2.MetricsData())
    assert exposition.render([series]) == ""
