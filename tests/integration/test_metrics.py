"""The Prometheus endpoint and the structured logs, as an operator sees them: counters that move
by what a real client produced and consumed, gauges that match the broker's state, no endpoint
unless asked for, and JSON log lines with a request log."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from pathlib import Path

from .broker_process import HOST, BrokerProcess, free_port
from .clients.confluent import (
    ConfluentKafkaClient,
    admin_client,
    assigned_consumer,
    create_topic,
    poll_records,
)
from .records import Record

SCRAPE_TIMEOUT_S = 10.0
CONSUME_TIMEOUT_S = 30.0
RECORDS = 300
TOPIC = "metered"
STABLE_METADATA_ATTEMPTS = 200

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape_text(port: int) -> str:
    url = f"http://{HOST}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def scrape(port: int) -> Samples:
    """Every sample of the endpoint by (name, labels)."""
    samples: Samples = {}
    for line in scrape_text(port).splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(line)
        assert match, f"not a Prometheus sample line: {line!r}"
        labels = frozenset(_LABEL.findall(match[2] or ""))
        samples[(match[1], labels)] = float(match[3])
    return samples


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (from /proc: its socket inodes in LISTEN state)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_the_endpoint_is_off_by_default(broker: BrokerProcess) -> None:
    assert listening_ports(broker.pid) == {broker.port}


def test_counters_move_by_what_a_client_produced_and_consumed(broker_factory) -> None:
    metrics_port = free_port()
    broker = broker_factory({"krust.metrics.port": str(metrics_port)})
    assert listening_ports(broker.pid) == {broker.port, metrics_port}
    create_topic(broker.bootstrap, TOPIC)
    before = scrape(metrics_port)

    records = [Record(f"k{i}".encode(), b"v" * (i % 50 + 1)) for i in range(RECORDS)]
    ConfluentKafkaClient().produce(broker.bootstrap, TOPIC, 0, records, codec="none")
    consumer = assigned_consumer(broker.bootstrap, TOPIC, 0)
    try:
        assert len(poll_records(consumer, RECORDS, CONSUME_TIMEOUT_S)) == RECORDS
    finally:
        consumer.close()
    after = scrape(metrics_port)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    topic = {"topic": TOPIC}
    assert moved("kafka_server_brokertopicmetrics_messagesin_total", **topic) == RECORDS
    log_size = sample(after, "kafka_log_log_size", topic=TOPIC, partition="0")
    payload = sum(len(r.key or b"") + len(r.value or b"") for r in records)
    # The log holds exactly the batches the producer sent; each carries the payload and more.
    assert moved("kafka_server_brokertopicmetrics_bytesin_total", **topic) == log_size
    assert log_size > payload
    assert moved("kafka_server_brokertopicmetrics_bytesin_total") >= log_size
    assert moved("kafka_server_brokertopicmetrics_bytesout_total", **topic) >= log_size
    assert moved("kafka_server_brokertopicmetrics_totalproducerequests_total", **topic) >= 1
    assert moved("kafka_server_brokertopicmetrics_totalfetchrequests_total", **topic) >= 1
    assert sample(after, "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    assert sample(
        after, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE"
    ) == sample(after, "kafka_server_brokertopicmetrics_totalproducerequests_total")

    for api in ("Produce", "Fetch", "Metadata", "ApiVersions", "CreateTopics"):
        request = {"request": api}
        count = sample(after, "kafka_network_requestmetrics_requests_total", **request)
        assert count > 0, api
        for histogram in ("requestqueuetimems", "localtimems", "remotetimems", "totaltimems"):
            name = f"kafka_network_requestmetrics_{histogram}"
            assert sample(after, f"{name}_count", **request) == count, (api, histogram)
            assert sample(after, f"{name}_bucket", **request, le="+Inf") == count
    # An acks=all produce waits in purgatory for the high watermark: remote time.
    assert sample(after, "kafka_network_requestmetrics_remotetimems_sum", request="Produce") > 0
    assert sample(after, "kafka_network_requestmetrics_remotetimems_sum", request="Metadata") == 0

    partitions, gauges = partitions_and_gauges(broker.bootstrap, metrics_port)
    assert gauges == (partitions, partitions)
    # The log cleaner runs by default and reports its backlog (dirty bytes of compacted logs).
    assert ("kafka_log_logcleanermanager_backlog_bytes", frozenset()) in after


def test_a_deleted_topic_leaves_the_scrape(broker_factory) -> None:
    metrics_port = free_port()
    broker = broker_factory({"krust.metrics.port": str(metrics_port)})
    create_topic(broker.bootstrap, "short-lived")
    ConfluentKafkaClient().produce(
        broker.bootstrap, "short-lived", 0, [Record(b"k", b"v")], codec="none"
    )
    assert 'topic="short-lived"' in scrape_text(metrics_port)

    admin = admin_client(broker.bootstrap)
    admin.delete_topics(["short-lived"])["short-lived"].result(SCRAPE_TIMEOUT_S)
    for _ in range(STABLE_METADATA_ATTEMPTS):
        if "short-lived" not in admin.list_topics(timeout=SCRAPE_TIMEOUT_S).topics:
            break
        time.sleep(0.1)
    text = scrape_text(metrics_port)
    assert 'topic="short-lived"' not in text
    assert "kafka_server_brokertopicmetrics_messagesin_total 1\n" in text


def partitions_in_metadata(bootstrap: str) -> int:
    described = admin_client(bootstrap).list_topics(timeout=SCRAPE_TIMEOUT_S)
    return sum(len(topic.partitions) for topic in described.topics.values())


def partitions_and_gauges(bootstrap: str, metrics_port: int) -> tuple[int, tuple[float, float]]:
    """The partitions Metadata lists and the partition and leader count gauges, once the two
    agree: the consumer's group lookup may be creating __consumer_offsets meanwhile, and a
    partition is hosted before Metadata lists it."""
    for _ in range(STABLE_METADATA_ATTEMPTS):
        partitions = partitions_in_metadata(bootstrap)
        samples = scrape(metrics_port)
        gauges = (
            sample(samples, "kafka_server_replicamanager_partitioncount"),
            sample(samples, "kafka_server_replicamanager_leadercount"),
        )
        if gauges == (partitions, partitions):
            break
        time.sleep(0.1)
    return partitions, gauges


def test_json_logs_carry_a_debug_request_log(broker_factory) -> None:
    broker = broker_factory(
        {"krust.log.format": "json", "krust.log.level": "info,kafka.request.logger=debug"}
    )
    create_topic(broker.bootstrap, "logged")
    broker.stop()

    lines = [json.loads(line) for line in broker.stderr_text().splitlines() if line.strip()]
    assert all({"timestamp", "level", "target", "message"} <= set(line) for line in lines)
    requests = [line for line in lines if line["target"] == "kafka.request.logger"]
    assert {line["level"] for line in requests} == {"DEBUG"}
    created = [line for line in requests if line["api"] == "CreateTopics"]
    assert created, f"no CreateTopics in the request log: {requests[:3]}"
    assert created[0]["client_id"] == "rdkafka"
    assert created[0]["client_address"].startswith(f"{HOST}:")
    assert created[0]["response_bytes"] > 0
    assert created[0]["total_time_ms"] >= created[0]["remote_time_ms"] >= 0
    # Python's lines come in the same shape (its shutdown line, logged at INFO).
    assert any(
        line["target"] == "krust.runtime.server" and line["level"] == "INFO" for line in lines
    )
