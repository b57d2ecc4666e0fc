"""What a run measures: the quick subset or the full matrix."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from workloads.produce import ProduceCase

_MB = 1_000_000
_MIB = 1024 * 1024

WORKLOADS = (
    "produce",
    "consume",
    "latency",
    "background-work",
    "authorization",
    "loaded-start",
    "many-partitions",
    "tls",
    "transactions",
    "rebalance",
)
# Not in a default run: it needs pyspark and Spark's Kafka connector, and no Kafka broker.
SPARK = "spark"
# Not in a default run: three-node clusters of each kind instead of the single brokers.
CLUSTER = "cluster"
# Start-up and idle RSS only: the rows every broker session measures, with no workload after.
STARTUP = "startup"


@dataclass(frozen=True)
class Plan:
    name: str
    repetitions: int
    produce_cases: tuple[ProduceCase, ...]
    produce_bytes: int
    consume_bytes: int
    consume_partitions: int
    latency_rate_per_s: int
    latency_seconds: float
    ceiling_bytes: int
    segment_bytes: int
    # Per measured run of the background-work workload (three runs of each kind); a few
    # seconds each, so a scrape or a cleaner pass is a fair share of the run.
    background_produce_bytes: int = 1000 * _MB
    background_compacted_bytes: int = 128 * _MIB
    # Per measured produce (and read) of the authorization workload, off and on, krust only.
    authorization_bytes: int = 500 * _MB
    # Full mode only: start-up with data, and the 10,000-partition workload.
    loaded_start_partitions: int = 0
    loaded_start_records: int = 0
    many_partitions: int = 0
    many_partitions_records_each: int = 0
    # The Spark workload: records (100 B values, 3 partitions) each job reads or writes.
    spark_records: int = 0
    # The TLS workload: bytes of 1 KiB records produced, then consumed, over SSL listeners.
    tls_bytes: int = 256 * _MIB
    # The cluster workload: bytes of 1 KiB records produced (RF=3, acks=all), seconds of
    # end-to-end latency measurement, and leader kills timed (their median is reported).
    cluster_produce_bytes: int = 100 * _MB
    cluster_latency_seconds: float = 10
    cluster_failovers: int = 3
    # The transactions workload: records (1 KiB) produced in transactions of 100 records, and
    # in transactions of 10,000.
    transaction_records_small: int = 20_000
    transaction_records_large: int = 100_000
    # The rebalance workload: a group of this many consumers on a topic of this many
    # partitions; per protocol and session, this many rounds of one join and one leave.
    rebalance_members: int = 20
    rebalance_partitions: int = 40
    rebalance_rounds: int = 2
    # Which of WORKLOADS (and SPARK, CLUSTER) to run (`run.py --workloads`); start-up and idle
    # RSS always are (but for SPARK and CLUSTER alone).
    workloads: tuple[str, ...] = WORKLOADS


FULL_MATRIX = tuple(
    ProduceCase(size, acks, partitions, compression)
    for size, acks, partitions, compression in product(
        (1024, 100), ("1", "all"), (1, 8), ("none", "lz4")
    )
)

QUICK = Plan(
    name="quick",
    repetitions=2,
    produce_cases=(
        ProduceCase(1024, "all", 8, "none"),
        ProduceCase(1024, "all", 8, "lz4"),
        ProduceCase(100, "1", 1, "none"),
    ),
    produce_bytes=100 * _MB,
    consume_bytes=256 * _MIB,
    consume_partitions=8,
    latency_rate_per_s=1000,
    latency_seconds=10,
    ceiling_bytes=512 * _MIB,
    segment_bytes=128 * _MIB,
    spark_records=200_000,
)

FULL = Plan(
    name="full",
    repetitions=3,
    produce_cases=FULL_MATRIX,
    # Long enough for steady state (the slowest client/broker pair runs ~40 s per case),
    # short enough that the 32 runs per session fit a run of about an hour.
    produce_bytes=300 * _MB,
    consume_bytes=2 * 1024 * _MIB,
    consume_partitions=8,
    latency_rate_per_s=1000,
    latency_seconds=60,
    ceiling_bytes=2 * 1024 * _MIB,
    segment_bytes=128 * _MIB,
    loaded_start_partitions=1000,
    loaded_start_records=5 * 1024 * 1024,  # 5 GiB of 1 KiB records
    many_partitions=10_000,
    many_partitions_records_each=10,
    spark_records=5_000_000,
    tls_bytes=1024 * _MIB,
    cluster_produce_bytes=300 * _MB,
    cluster_latency_seconds=60,
    cluster_failovers=5,
    transaction_records_small=100_000,
    transaction_records_large=300_000,
    rebalance_rounds=5,
)
