"""What the broker's own background work costs a producer: retention deleting segments and
the log cleaner compacting a topic while a producer writes, against the same producer with
both idle; and (krust) the Prometheus endpoint on and scraped against off."""

from __future__ import annotations

import os
import statistics
import threading
import urllib.request
from dataclasses import dataclass

from brokers import BrokerProcess, KrustBroker
from confluent_kafka import Producer
from integration.cluster import HOST, free_port

from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.topics import create_topic

CASE = ProduceCase(record_bytes=1024, acks="1", partitions=8, compression="none")
_MIB = 1024 * 1024
SEGMENT_BYTES = _MIB  # Kafka 4's smallest segment: retention and cleaning see many segments
# Each measured run writes far more than this per partition, so retention deletes throughout.
RETAINED_BYTES_PER_PARTITION = 8 * _MIB
COMPACTED_KEYS = 1000
SCRAPE_EVERY_S = 1.0


@dataclass(frozen=True)
class BackgroundWorkResult:
    idle_mb_per_s: float
    busy_mb_per_s: float


def _fill_compacted(bootstrap: str, topic: str, total_bytes: int) -> None:
    """Many versions of a few keys: a log the cleaner will mostly throw away."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 500_000}
    )
    value = b"v" * 1000
    for index in range(total_bytes // len(value)):
        key = f"key-{index % COMPACTED_KEYS:05d}".encode()
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
        if index % 1000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("background work: compacted fill left records undelivered")


def produce_with_and_without_background_work(
    broker: BrokerProcess, produce_bytes: int, compacted_bytes: int, repetitions: int
) -> BackgroundWorkResult:
    """Alternates an idle run (plain topic, nothing to clean or delete) with a busy one (a topic
    whose retention.bytes is far below what the run writes, while the cleaner compacts a topic
    just filled with many versions of each key); medians of each."""
    bootstrap = broker.bootstrap
    segments = {"segment.bytes": str(SEGMENT_BYTES)}
    records = produce_bytes // CASE.record_bytes
    runs = [
        tuple(f"bg-{kind}-{run}" for kind in ("plain", "retained", "compacted"))
        for run in range(repetitions)
    ]
    # Every topic exists (logs included) before the first measured run: a produce to a topic
    # whose logs are still being created waits for the client's retry.
    for plain, retained, compacted in runs:
        create_topic(bootstrap, plain, CASE.partitions, configs=segments)
        create_topic(
            bootstrap,
            retained,
            CASE.partitions,
            configs={**segments, "retention.bytes": str(RETAINED_BYTES_PER_PARTITION)},
        )
        create_topic(
            bootstrap,
            compacted,
            1,
            configs={**segments, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"},
        )
    _warm_up(bootstrap, "bg-warm-up", records)
    idle: list[float] = []
    busy: list[float] = []
    for plain, retained, compacted in runs:
        # Each measured run starts with the earlier runs' gigabytes written back.
        os.sync()
        idle.append(produce_with_librdkafka(bootstrap, plain, CASE, records).mb_per_s)
        os.sync()
        _fill_compacted(bootstrap, compacted, compacted_bytes)
        busy.append(produce_with_librdkafka(bootstrap, retained, CASE, records).mb_per_s)
    return BackgroundWorkResult(statistics.median(idle), statistics.median(busy))


@dataclass(frozen=True)
class MetricsOverheadResult:
    off_mb_per_s: float
    on_mb_per_s: float


def produce_with_metrics_on_and_off(
    broker: KrustBroker, produce_bytes: int, repetitions: int
) -> MetricsOverheadResult:
    """Restarts krust with its Prometheus endpoint off and on, alternating, and produces the
    same case each time; while on, the endpoint is scraped every second as Prometheus would."""
    records = produce_bytes // CASE.record_bytes
    off: list[float] = []
    on: list[float] = []
    for run in range(repetitions):
        for metrics_port in (None, free_port()):
            broker.stop()
            broker.metrics_port = metrics_port
            broker.start()
            topic = f"metrics-{'on' if metrics_port else 'off'}-{run}"
            create_topic(broker.bootstrap, topic, CASE.partitions)
            # Also lets the topic's logs be created before the measured run.
            _warm_up(broker.bootstrap, f"{topic}-warm-up", records)
            os.sync()
            with _Scraper(metrics_port):
                result = produce_with_librdkafka(broker.bootstrap, topic, CASE, records)
            (on if metrics_port else off).append(result.mb_per_s)
    broker.stop()
    broker.metrics_port = None
    broker.start()
    return MetricsOverheadResult(statistics.median(off), statistics.median(on))


def _warm_up(bootstrap: str, topic: str, records: int) -> None:
    """A quarter-size unmeasured run first: the first produce after a start is slower."""
    create_topic(bootstrap, topic, CASE.partitions)
    produce_with_librdkafka(bootstrap, topic, CASE, records // 4)


class _Scraper:
    """Scrapes http://HOST:port/metrics every SCRAPE_EVERY_S until the block ends."""

    def __init__(self, port: int | None) -> None:
        self._port = port
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Scraper:
        if self._port is not None:
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        url = f"http://{HOST}:{self._port}/metrics"
        while not self._done.wait(SCRAPE_EVERY_S):
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
