"""Client quotas with real clients: Kafka's kafka-configs sets and describes them, they survive a
restart, and throttled producers and consumers keep to their byte rates (KIP-219)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import AlterClientQuotasRequest, ListGroupsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from . import wire
from .broker_process import BrokerProcess
from .clients.confluent import create_topic
from .kafka_api import call, call_broker
from .kafka_cli import CONFIG_COMMAND, run_tool
from .records import now_ms

# Short windows so a client's first burst (up to samples - 1 windows of its quota) is over
# before the measured stretch starts.
WINDOW = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
WARM_UP_S = 3.0
MEASURED_S = 10.0
VALUE = b"v" * 1000
RATE = 100_000
TOLERANCE = 0.15


def set_quota(
    broker: BrokerProcess, entity: list[tuple[str, str | None]], key: str, value: float
) -> None:
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[entry.OpData(key=key, value=float(value), remove=False)],
            )
        ],
        validate_only=False,
    )
    response = call_broker(broker.port, request, 1)
    assert [entry.error_code for entry in response.entries] == [0]


def measured_rate(events: list[tuple[float, int]], start: float) -> float:
    """Bytes per second of the events between `start + WARM_UP_S` and MEASURED_S later."""
    begin, end = start + WARM_UP_S, start + WARM_UP_S + MEASURED_S
    return sum(size for at, size in events if begin <= at < end) / MEASURED_S


def test_kafka_configs_sets_and_describes_quotas_that_survive_a_restart(
    broker_factory: Any,
) -> None:
    broker = broker_factory()
    entity = ("--entity-type", "clients", "--entity-name", "app")
    done = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--add-config",
        "producer_byte_rate=1024,consumer_byte_rate=2048",
        *entity,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--add-config",
        "request_percentage=50",
        "--entity-type",
        "users",
        "--entity-default",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    broker.stop()
    broker.restart()
    described = run_tool(CONFIG_COMMAND, broker.bootstrap, "--describe", *entity)
    assert described.returncode == 0, described.stderr
    assert "Quota configs for client-id 'app' are" in described.stdout
    assert "producer_byte_rate=1024.0" in described.stdout
    assert "consumer_byte_rate=2048.0" in described.stdout
    defaults = run_tool(
        CONFIG_COMMAND, broker.bootstrap, "--describe", "--entity-type", "users", "--entity-default"
    )
    assert "request_percentage=50.0" in defaults.stdout, defaults.stdout + defaults.stderr
    refused = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--add-config",
        "producer_byte_rate=1.5",
        *entity,
    )
    assert refused.returncode != 0
    assert "cannot be a fractional value" in refused.stdout + refused.stderr


def test_a_throttled_producer_keeps_to_its_byte_rate(broker_factory: Any) -> None:
    broker = broker_factory(WINDOW)
    create_topic(broker.bootstrap, "throttled")
    set_quota(broker, [("client-id", "slow")], "producer_byte_rate", RATE)
    events: list[tuple[float, int]] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "slow",
            "linger.ms": 5,
            "batch.size": 16_384,
            # A short queue: what is left at the end is purged, not waited for.
            "queue.buffering.max.kbytes": 256,
        }
    )

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            events.append((time.monotonic(), len(message.value())))

    start = time.monotonic()
    while time.monotonic() < start + WARM_UP_S + MEASURED_S:
        try:
            producer.produce("throttled", VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(5)
    rate = measured_rate(events, start)
    assert abs(rate - RATE) <= TOLERANCE * RATE, f"{rate:.0f} B/s against a quota of {RATE}"


def test_a_throttled_consumer_keeps_to_its_byte_rate(broker_factory: Any) -> None:
    # The reader's group forms at once: no initial rebalance delay before the measuring starts.
    broker = broker_factory({**WINDOW, "group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, "backlog")
    # Small batches: a fetch returns at least one whole batch, and one larger than the
    # consumer's quota window allows would be throttled every time (as in Kafka).
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16_384}
    )
    records = int(RATE * (WARM_UP_S + MEASURED_S + 3) / len(VALUE))
    for _ in range(records):
        producer.produce("backlog", VALUE)
        producer.poll(0)
    assert producer.flush(30) == 0
    set_quota(broker, [("user", None)], "consumer_byte_rate", RATE)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "reader",
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Fetches small against the quota window, so a throttled fetch (whose records are
            # not sent) costs little of the measured stretch.
            "max.partition.fetch.bytes": 16_384,
            "fetch.max.bytes": 16_384,
            "message.max.bytes": 16_384,
        }
    )
    consumer.subscribe(["backlog"])
    events: list[tuple[float, int]] = []
    while consumer.poll(0.5) is None:
        pass
    start = time.monotonic()
    while time.monotonic() < start + WARM_UP_S + MEASURED_S:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            events.append((time.monotonic(), len(message.value())))
    consumer.close()
    rate = measured_rate(events, start)
    assert abs(rate - RATE) <= TOLERANCE * RATE, f"{rate:.0f} B/s against a quota of {RATE}"


def produce_request(topic: str, value_bytes: int) -> ProduceRequest:
    data = ProduceRequest.TopicProduceData
    batch = wire.record_batch([(None, b"x" * value_bytes)], now_ms())
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=batch)])
        ],
    )


def metadata_request() -> MetadataRequest:
    return MetadataRequest(topics=[], allow_auto_topic_creation=False)


def test_an_over_quota_produce_carries_its_throttle_time_and_mutes_the_connection(
    broker_factory: Any,
) -> None:
    # Windows of 1 s: 10 kB against 5 kB/s is a throttle time of (10 - 5) / 5 x 1 s.
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    create_topic(broker.bootstrap, "raw")
    done = run_tool(
        CONFIG_COMMAND,
        broker.bootstrap,
        "--alter",
        "--add-config",
        "producer_byte_rate=5000",
        "--entity-type",
        "clients",
        "--entity-name",
        wire.CLIENT_ID,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with wire.connect("127.0.0.1", broker.port, timeout=30) as sock:
        produced = call(sock, produce_request("raw", 10_000), 9)
        answered = time.monotonic()
        assert produced.responses[0].partition_responses[0].error_code == 0
        throttle_ms = produced.throttle_time_ms
        assert 900 <= throttle_ms <= 1100
        # The connection is not read until the throttle time is over.
        call(sock, metadata_request(), 12)
        assert time.monotonic() - answered >= throttle_ms / 1000 * 0.95
    set_quota(broker, [("client-id", wire.CLIENT_ID)], "producer_byte_rate", 10_000_000)
    with wire.connect("127.0.0.1", broker.port, timeout=30) as sock:
        assert call(sock, produce_request("raw", 10_000), 9).throttle_time_ms == 0


def test_a_client_too_old_to_throttle_itself_gets_its_response_after_the_throttle_time(
    broker_factory: Any,
) -> None:
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    create_topic(broker.bootstrap, "raw")
    set_quota(broker, [("client-id", wire.CLIENT_ID)], "producer_byte_rate", 5000)
    with wire.connect("127.0.0.1", broker.port, timeout=30) as sock:
        sent = time.monotonic()
        # Produce v5 predates KIP-219: the broker delays the response instead.
        produced = call(sock, produce_request("raw", 10_000), 5)
        assert produced.throttle_time_ms > 0
        assert time.monotonic() - sent >= produced.throttle_time_ms / 1000 * 0.95


def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(
    broker_factory: Any,
) -> None:
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    # A millionth of a second per second: any request's handling time goes over it.
    set_quota(broker, [("client-id", "busy")], "request_percentage", 0.0001)
    throttled = call_broker(broker.port, metadata_request(), 12, client_id="busy")
    assert 0 < throttled.throttle_time_ms <= 1000, "capped at one quota window"
    other = call_broker(broker.port, metadata_request(), 12, client_id="idle")
    assert other.throttle_time_ms == 0


def test_request_percentage_throttles_requests_served_in_python_too(
    broker_factory: Any,
) -> None:
    """ListGroups is answered by the Python group coordinator, not the core: its handling
    time counts against request_percentage as a native request's does."""
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    set_quota(broker, [("client-id", "busy")], "request_percentage", 0.0001)
    request = ListGroupsRequest(states_filter=[])
    throttled = call_broker(broker.port, request, 4, client_id="busy")
    assert 0 < throttled.throttle_time_ms <= 1000, "capped at one quota window"
    other = call_broker(broker.port, request, 4, client_id="idle")
    assert other.throttle_time_ms == 0
