"""Client metrics (KIP-714) as an operator and a client see them: `kafka-client-metrics` lists,
describes, alters and deletes subscriptions that survive a restart; librdkafka pushes its
metrics by itself once a subscription matches it, and they appear on the Prometheus endpoint
and in a `metric.reporters` plugin; and the errors Kafka answers."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from krust.bridge.protocol import build_entity, encode_entity

from . import wire
from .broker_process import free_port
from .clients.java import JavaClient, JavaCommandError
from .cluster import Cluster
from .kafka_cli import run_tool
from .test_metrics import scrape_text

CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
WAIT_S = 30.0
INTERVAL_S = 0.5
JAVA_POLL_S = 3.0

REPORTER = """
import json
import os
from opentelemetry.proto.metrics.v1 import metrics_pb2

class Reporter:
    def configure(self, configs):
        self.path = os.environ["REPORTER_FILE"]

    def client_receiver(self):
        return self

    def export_metrics(self, context, payload):
        data = metrics_pb2.MetricsData()
        data.ParseFromString(payload.data)
        names = sorted({m.name for rm in data.resource_metrics for sm in rm.scope_metrics
                        for m in sm.metrics})
        line = {"instance": str(payload.client_instance_id), "client_id": context.client_id,
                "terminating": payload.is_terminating, "names": names}
        with open(self.path, "a") as out:
            out.write(json.dumps(line) + "\\n")
"""


def client_metrics(bootstrap: str, *args: str) -> Any:
    return run_tool(CLIENT_METRICS_COMMAND, bootstrap, *args)


def wait_until(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)
    return value


def test_kafka_client_metrics_lists_describes_alters_and_deletes(broker: Any) -> None:
    bootstrap = broker.bootstrap
    # As Kafka: without a receiver (no metric.reporters, no metrics endpoint) clients are not
    # offered the telemetry apis; the subscriptions can be managed all the same.
    with wire.connect("127.0.0.1", broker.port) as sock:
        ranges = wire.api_versions(sock, 0, correlation_id=1).ranges
    assert 71 not in ranges and 72 not in ranges and ranges[74] == (0, 1)
    assert client_metrics(bootstrap, "--list").stdout.strip() == ""
    altered = client_metrics(
        bootstrap,
        "--alter",
        "--name",
        "producers",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "1000",
        "--match",
        "client_software_name=librdkafka,client_id=app-.*",
    )
    assert altered.returncode == 0, altered.stdout + altered.stderr
    assert "Altered client metrics config for producers." in altered.stdout
    assert (
        client_metrics(bootstrap, "--alter", "--name", "everything", "--metrics", "*").returncode
        == 0
    )
    assert client_metrics(bootstrap, "--list").stdout.split() == ["everything", "producers"]
    described = client_metrics(bootstrap, "--describe", "--name", "producers").stdout
    assert "Client metrics configs for producers are:" in described
    assert "  metrics=org.apache.kafka.producer." in described
    assert "  interval.ms=1000" in described
    assert "  match=client_software_name=librdkafka,client_id=app-.*" in described
    # Without --name every subscription is described; unset keys show Kafka's defaults.
    everything = client_metrics(bootstrap, "--describe").stdout
    assert "Client metrics configs for everything are:" in everything
    assert "  interval.ms=300000" in everything

    # kafka-configs sees the same resources (--entity-type client-metrics).
    configs = run_tool(
        CONFIG_COMMAND,
        bootstrap,
        "--describe",
        "--entity-type",
        "client-metrics",
        "--entity-name",
        "producers",
    )
    assert configs.returncode == 0, configs.stdout + configs.stderr
    assert "interval.ms=1000" in configs.stdout

    # Kafka's checks, with Kafka's messages.
    refused = [
        (("--interval", "50"), "interval must be between 100 and 3600000"),
        (("--match", "client_colour=red"), "Illegal client matching pattern"),
        (("--match", "client_id=(unclosed"), "is not a valid regular expression"),
    ]
    for args, message in refused:
        done = client_metrics(bootstrap, "--alter", "--name", "bad", *args)
        assert done.returncode == 1 and message in done.stdout, done.stdout

    # Subscriptions are ConfigRecords in the metadata log: they survive a restart.
    broker.stop()
    broker.restart()
    assert client_metrics(bootstrap, "--list").stdout.split() == ["everything", "producers"]
    deleted = client_metrics(bootstrap, "--delete", "--name", "everything")
    assert "Deleted client metrics config for everything." in deleted.stdout
    assert client_metrics(bootstrap, "--list").stdout.split() == ["producers"]


def test_librdkafka_pushes_its_metrics_to_the_endpoint_and_the_plugin(
    broker_factory: Any, tmp_path: Path
) -> None:
    """librdkafka (confluent-kafka) and the Java client push by themselves once a subscription
    matches them; a client no subscription matches pushes nothing."""
    (tmp_path / "reporter_plugin.py").write_text(REPORTER)
    received = tmp_path / "received.jsonl"
    metrics_port = free_port()
    paths = [str(tmp_path), os.environ.get("PYTHONPATH", "")]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, paths)), "REPORTER_FILE": str(received)}
    broker = broker_factory(
        {"krust.metrics.port": str(metrics_port), "metric.reporters": "reporter_plugin:Reporter"},
        env=env,
    )
    subscriptions = [
        ("apps", "org.apache.kafka.producer.", "client_id=app-.*"),
        ("java", "org.apache.kafka.consumer.", "client_software_name=apache-kafka-java"),
    ]
    for name, metrics, match in subscriptions:
        done = client_metrics(
            broker.bootstrap, "--alter", "--name", name, "--metrics", metrics,
            "--interval", "100", "--match", match,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    def pushes() -> list[dict[str, Any]]:
        lines = received.read_text().splitlines() if received.exists() else []
        return [json.loads(line) for line in lines]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "app-7"})
    other = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "unmatched"})
    for client in (producer, other):
        client.produce("pushed", b"v")
        client.flush(10)

    def on_endpoint(label: str) -> str | None:
        text = scrape_text(metrics_port)
        return text if label in text else None

    text = wait_until(lambda: on_endpoint('client_id="app-7"'), "librdkafka's metrics appear")
    first = wait_until(pushes, "the plugin received a push")[0]
    assert first["client_id"] == "app-7" and not first["terminating"]
    assert first["names"]
    assert all(n.startswith("org.apache.kafka.producer.") for n in first["names"])
    assert f'client_instance_id="{first["instance"]}"' in text
    assert 'client_software_name="confluent-kafka-python"' in text
    assert "kafka_client_producer_record_queue_time_avg{" in text
    assert 'client_id="unmatched"' not in scrape_text(metrics_port)

    # The Java client pushes too: a consumer polling for 3 s (for more records than there are).
    with pytest.raises(JavaCommandError, match="timed out after 2 of 3 records"):
        JavaClient().consume(broker.bootstrap, "pushed", 0, 3, JAVA_POLL_S)
    text = wait_until(
        lambda: on_endpoint('client_software_name="apache-kafka-java"'), "Java's metrics appear"
    )
    assert "kafka_client_consumer_" in text
    java = [p for p in pushes() if p["client_id"] not in ("app-7", "unmatched")]
    assert java
    assert all(n.startswith("org.apache.kafka.consumer.") for p in java for n in p["names"])
    assert {p["client_id"] for p in pushes()} - {j["client_id"] for j in java} == {"app-7"}
    del producer, other


def _telemetry_call(sock: socket.socket, api_key: int, fields: dict[str, Any]) -> Any:
    """One v0 GetTelemetrySubscriptions or PushTelemetry, encoded and decoded with kio."""
    body = encode_entity(build_entity(load_request_schema(api_key, 0), fields))
    sock.sendall(wire.frame(wire.flexible_request_header(api_key, 0, 9, "app-wire") + body))
    response = wire.read_frame(sock)
    assert int.from_bytes(response[:4], "big") == 9
    # After the flexible response header's empty tagged fields.
    entity, _ = entity_reader(load_response_schema(api_key, 0))(response[5:], 0)
    return entity


def test_pushes_get_kafkas_errors_over_the_wire(broker_factory: Any) -> None:
    metrics_port = free_port()
    broker = broker_factory({"telemetry.max.bytes": "64", "krust.metrics.port": str(metrics_port)})
    with wire.connect("127.0.0.1", broker.port) as sock:
        ranges = wire.api_versions(sock, 0, correlation_id=1).ranges
    assert (ranges[71], ranges[72], ranges[74]) == ((0, 0), (0, 0), (0, 1))
    wait_until(
        lambda: "kafka_server_client_metrics_instance_count 0\n" in scrape_text(metrics_port),
        "the client metrics stats are on the endpoint before any client asks",
    )
    done = client_metrics(
        broker.bootstrap, "--alter", "--name", "all", "--metrics", "*", "--interval", "500"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with wire.connect("127.0.0.1", broker.port) as sock:
        got = _telemetry_call(sock, 71, {"client_instance_id": None})
        assert got.error_code is ErrorCode.none
        assert got.telemetry_max_bytes == 64 and list(got.requested_metrics) == ["*"]
        instance, subscription = got.client_instance_id, got.subscription_id
        again = _telemetry_call(sock, 71, {"client_instance_id": instance})
        assert again.error_code is ErrorCode.throttling_quota_exceeded  # 5 minutes not over

        def push(**fields: Any) -> ErrorCode:
            request = {
                "client_instance_id": instance,
                "subscription_id": subscription,
                "terminating": False,
                "compression_type": 0,
                "metrics": b"",
                **fields,
            }
            return _telemetry_call(sock, 72, request).error_code

        def next_interval() -> None:
            time.sleep(INTERVAL_S)

        assert push(client_instance_id=None) is ErrorCode.invalid_request
        assert push(subscription_id=subscription + 1) is ErrorCode.unknown_subscription_id
        # A client may ask for its subscription again at once after UNKNOWN_SUBSCRIPTION_ID
        # (not after other errors), but pushes only once the interval is over.
        assert _telemetry_call(sock, 71, {"client_instance_id": instance}).error_code is (
            ErrorCode.none
        )
        assert push() is ErrorCode.throttling_quota_exceeded
        next_interval()
        assert push(compression_type=9) is ErrorCode.unsupported_compression_type
        next_interval()
        assert push(metrics=b"x" * 65) is ErrorCode.telemetry_too_large
        next_interval()
        assert push(metrics=b"not otlp") is ErrorCode.invalid_record
        assert push(terminating=True) is ErrorCode.none  # a last push is never throttled
        assert push(terminating=True) is ErrorCode.invalid_request
    # Kafka's ClientMetricsStats count what happened.
    stats = scrape_text(metrics_port)
    assert "kafka_server_client_metrics_instance_count 1\n" in stats
    assert "kafka_server_client_metrics_unknown_subscription_request_total 1\n" in stats
    assert "kafka_server_client_metrics_throttle_total 2\n" in stats
    assert "kafka_server_client_metrics_plugin_error_total 1\n" in stats


def test_a_subscription_reaches_every_broker_of_a_cluster(cluster: Cluster) -> None:
    """Subscriptions are ConfigRecords in the replicated metadata log: every broker lists and
    describes one created through another."""
    name = "cluster-wide"
    first, *others = cluster.brokers
    done = client_metrics(
        first.bootstrap, "--alter", "--name", name, "--metrics", "*", "--interval", "1000"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        for node in others:
            wait_until(
                lambda node=node: name in client_metrics(node.bootstrap, "--list").stdout.split(),
                f"node {node.node_id} lists the subscription",
            )
            described = client_metrics(node.bootstrap, "--describe", "--name", name).stdout
            assert "  interval.ms=1000" in described and "  metrics=*" in described
    finally:
        client_metrics(first.bootstrap, "--delete", "--name", name)
