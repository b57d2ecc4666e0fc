"""Start-up time to the first good Metadata answer, and recovery after kill -9."""

from __future__ import annotations

import time
from dataclasses import dataclass

import krust
from brokers import BrokerProcess

from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.topics import create_topic


@dataclass(frozen=True)
class LoadedStartResult:
    partitions: int
    # All written since the broker started, so the restart after kill -9 recovers it.
    data_bytes: int
    recovery_after_kill_s: float
    clean_restart_s: float


def loaded_restarts(broker: BrokerProcess, partitions: int, records: int) -> LoadedStartResult:
    """Fill `partitions` partitions on a freshly started broker and kill -9 it: the restart
    must recover everything not yet flushed (with the default flush settings, both brokers
    flush a segment only when it rolls). Then stop it cleanly and time a clean restart."""
    case = ProduceCase(record_bytes=1024, acks="1", partitions=partitions, compression="none")
    create_topic(broker.bootstrap, "startup-loaded", partitions)
    produced = produce_with_librdkafka(broker.bootstrap, "startup-loaded", case, records)
    broker.kill()
    recovered = broker.start()
    broker.stop()
    clean = broker.start()
    return LoadedStartResult(partitions, produced.bytes, recovered, clean)


def fixture_ready_s() -> float:
    """Seconds `krust.Broker().start()` takes on a new temporary data dir: it returns once the
    broker answers Metadata, which is when the pytest fixture hands the broker to a test."""
    started = time.monotonic()
    broker = krust.Broker().start()
    ready = time.monotonic() - started
    broker.stop()
    return ready
