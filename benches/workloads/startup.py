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
    # Written after the clean restart, before kill -9: what the second restart recovers.
    tail_bytes: int
    clean_restart_s: float
    recovery_after_kill_s: float


def loaded_restarts(broker: BrokerProcess, partitions: int, records: int) -> LoadedStartResult:
    """Fill `partitions` partitions, then time a clean restart; write a tenth as much again,
    kill -9 and time the restart, which must recover what was written since the clean start
    (killing right after a clean start would leave nothing to recover)."""
    case = ProduceCase(record_bytes=1024, acks="1", partitions=partitions, compression="none")
    create_topic(broker.bootstrap, "startup-loaded", partitions)
    produced = produce_with_librdkafka(broker.bootstrap, "startup-loaded", case, records)
    broker.stop()
    clean = broker.start()
    tail = produce_with_librdkafka(broker.bootstrap, "startup-loaded", case, records // 10)
    broker.kill()
    recovered = broker.start()
    return LoadedStartResult(partitions, produced.bytes, tail.bytes, clean, recovered)
