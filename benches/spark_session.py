"""The Spark workload's session: one fresh krust broker and one SparkSession; Spark's JVM Kafka
connector and the `krust` data source take turns on the same jobs (no Apache Kafka broker)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from brokers import KrustBroker
from measure import cpu_seconds
from plan import Plan
from pyspark.sql import SparkSession
from report import Better, Metric, Results
from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.spark import (
    FORMATS,
    VALUE_BYTES,
    SparkJob,
    count,
    start_spark,
    sum_lengths_by_partition,
    write,
)
from workloads.topics import create_topic

PARTITIONS = 3
# Results keep two columns per metric; here "kafka" is Spark's JVM connector.
COLUMNS = ('format("kafka") (JVM)', 'format("krust") (Arrow)', "krust/JVM")
# The goal for the Arrow path against the JVM connector.
TARGET = 2.0

Job = Callable[[SparkSession, str, str, str, int], SparkJob]


@dataclass(frozen=True)
class JobKind:
    label: str
    job: Job
    writes: bool


JOBS = (
    JobKind("read: count()", count, writes=False),
    JobKind("read: groupBy(partition).sum(length(value))", sum_lengths_by_partition, False),
    JobKind(f"write: {VALUE_BYTES} B values, no key, 2 tasks", write, writes=True),
)


def _metric(kind: JobKind, what: str, unit: str, better: Better, target: float | None) -> Metric:
    group = f"Spark data source ({PARTITIONS} partitions, {VALUE_BYTES} B values, local[2])"
    return Metric(group, f"{kind.label}: {what}", unit, better, target, COLUMNS)


@dataclass
class SparkSessionRun:
    broker: KrustBroker
    plan: Plan
    results: Results

    def run(self) -> None:
        """Fill a topic, warm both paths up once, then alternate the formats job by job for
        the plan's repetitions; each measurement starts with the disk written back."""
        records = self.plan.spark_records
        self.broker.reset()
        self.broker.start()
        spark = start_spark()
        try:
            bootstrap = self.broker.bootstrap
            warm_up_records = max(records // 10, 1000)
            for topic, size in (("spark-source", records), ("spark-warm-up", warm_up_records)):
                create_topic(bootstrap, topic, PARTITIONS)
                produce_with_librdkafka(
                    bootstrap, topic, ProduceCase(VALUE_BYTES, "1", PARTITIONS, "none"), size
                )
            # Every sink topic exists before the first job: a produce to a topic whose logs
            # are still being created waits for the client's retry.
            rounds = ["warm-up", *(str(index) for index in range(self.plan.repetitions))]
            for name in rounds:
                for source in FORMATS:
                    create_topic(bootstrap, f"spark-sink-{source}-{name}", PARTITIONS)
            for kind in JOBS:
                for source in FORMATS:
                    topic = f"spark-sink-{source}-warm-up" if kind.writes else "spark-warm-up"
                    kind.job(spark, source, bootstrap, topic, warm_up_records)
            for repetition in range(self.plan.repetitions):
                for kind in JOBS:
                    # Alternate which format goes first, so neither always follows the other.
                    order = FORMATS if repetition % 2 == 0 else FORMATS[::-1]
                    for source in order:
                        topic = (
                            f"spark-sink-{source}-{repetition}" if kind.writes else "spark-source"
                        )
                        self._measure(spark, kind, source, topic, records)
        finally:
            spark.stop()
            self.broker.stop()

    def _measure(
        self, spark: SparkSession, kind: JobKind, source: str, topic: str, records: int
    ) -> None:
        os.sync()
        # This process's tree holds the Spark JVM, its Python workers and the broker.
        total_before, broker_before = cpu_seconds(os.getpid()), cpu_seconds(self.broker.pid)
        job = kind.job(spark, source, self.broker.bootstrap, topic, records)
        broker_cpu = cpu_seconds(self.broker.pid) - broker_before
        spark_cpu = cpu_seconds(os.getpid()) - total_before - broker_cpu
        column = "krust" if source == "krust" else "kafka"
        millions = job.rows / 1e6
        for metric, value in (
            (_metric(kind, "rows/s", "rows/s", Better.HIGHER, TARGET), job.rows_per_s),
            (
                _metric(kind, "Spark CPU per M rows", "CPU s", Better.LOWER, None),
                spark_cpu / millions,
            ),
            (
                _metric(kind, "broker CPU per M rows", "CPU s", Better.LOWER, None),
                broker_cpu / millions,
            ),
        ):
            self.results.add(metric, column, value)
