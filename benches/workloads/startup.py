"""Start-up time to the first good Metadata answer, and recovery after kill -9."""

from __future__ import annotations

from dataclasses import dataclass

from brokers import BrokerProcess

from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.topics import create_topic


@dataclass(frozen=True)
class LoadedStartResult:
    partitions: int
    data_bytes: int
    clean_restart_s: float
    recovery_after_kill_s: float


def loaded_restarts(broker: BrokerProcess, partitions: int, records: int) -> LoadedStartResult:
    """Fill `partitions` partitions, then time a clean restart and one after kill -9."""
    case = ProduceCase(record_bytes=1024, acks="1", partitions=partitions, compression="none")
    create_topic(broker.bootstrap, "startup-loaded", partitions)
    produced = produce_with_librdkafka(broker.bootstrap, "startup-loaded", case, records)
    broker.stop()
    clean = broker.start()
    broker.kill()
    recovered = broker.start()
    return LoadedStartResult(partitions, produced.bytes, clean, recovered)
