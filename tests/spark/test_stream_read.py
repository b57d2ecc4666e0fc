"""`spark.readStream.format("krust")`: admission control, Trigger.AvailableNow, restarts from the
checkpoint and partitions added to a topic."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka.admin import NewPartitions
from integration.broker_process import BrokerProcess
from integration.clients.confluent import (
    ADMIN_TIMEOUT_S,
    ConfluentKafkaClient,
    admin_client,
    create_topic,
    delete_records,
    wait_for_partition_count,
)
from integration.records import Record
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

QUERY_TIMEOUT_S = 120


def produce(bootstrap: str, topic: str, partition: int, values: range) -> None:
    records = [Record(f"k{i}".encode(), f"{topic}-{partition}-{i}".encode()) for i in values]
    ConfluentKafkaClient().produce(bootstrap, topic, partition, records, "snappy")


def start_available_now(
    spark: SparkSession, bootstrap: str, topic: str, work: Path, **options: str
) -> StreamingQuery:
    """A query from `topic` to parquet files in `work`, checkpointed there, that reads what is
    available now and stops."""
    reader = (
        spark.readStream.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return (
        reader.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def run_available_now(
    spark: SparkSession, bootstrap: str, topic: str, work: Path, **options: str
) -> list[int]:
    """Runs the query until everything available was read; the rows of each micro-batch that
    had any."""
    query = start_available_now(spark, bootstrap, topic, work, **options)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not finish"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def read_output(spark: SparkSession, work: Path) -> list[tuple[int, int, str]]:
    rows = spark.read.parquet(str(work / "out")).collect()
    return sorted((row.partition, row.offset, row.value) for row in rows)


def expected(
    topic: str, partitions: dict[int, range] | dict[int, list[int]]
) -> list[tuple[int, int, str]]:
    return sorted(
        (partition, offset, f"{topic}-{partition}-{offset}")
        for partition, offsets in partitions.items()
        for offset in offsets
    )


def test_max_offsets_per_trigger_splits_and_a_restart_reads_only_new_records(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-stream"
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, 0, range(30))
    produce(bootstrap, topic, 1, range(20))

    batches = run_available_now(spark, bootstrap, topic, tmp_path, maxOffsetsPerTrigger="20")
    assert batches == [20, 20, 10]
    assert read_output(spark, tmp_path) == expected(topic, {0: range(30), 1: range(20)})

    produce(bootstrap, topic, 1, range(20, 27))
    batches = run_available_now(spark, bootstrap, topic, tmp_path, maxOffsetsPerTrigger="20")
    assert batches == [7], "the restarted query reads only what arrived since"
    assert read_output(spark, tmp_path) == expected(topic, {0: range(30), 1: range(27)})


def test_a_partition_added_while_the_query_runs_is_read_from_its_start(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-stream-grows"
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, 0, range(5))
    query = (
        spark.readStream.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        admin = admin_client(bootstrap)
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(ADMIN_TIMEOUT_S)
        assert wait_for_partition_count(bootstrap, topic, 2) == 2
        produce(bootstrap, topic, 1, range(4))
        produce(bootstrap, topic, 0, range(5, 6))
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert read_output(spark, tmp_path) == expected(topic, {0: range(6), 1: range(4)})


def test_records_deleted_before_they_were_read(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    """A restart finds records it never read deleted: with failOnDataLoss true the query fails
    naming the option, with false it reads on from the new log start. Both restart from the same
    checkpoint (the failing query from a copy), so the first read runs once."""
    bootstrap, topic = spark_broker.bootstrap, "spark-stream-loss"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, 0, range(10))
    assert run_available_now(spark, bootstrap, topic, tmp_path) == [10]

    produce(bootstrap, topic, 0, range(10, 20))
    assert delete_records(bootstrap, topic, 15) == 15

    failing = tmp_path / "fail-on-data-loss"
    shutil.copytree(tmp_path / "checkpoint", failing / "checkpoint")
    query = start_available_now(spark, bootstrap, topic, failing, failOnDataLoss="true")
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(QUERY_TIMEOUT_S)
    assert "set the option failOnDataLoss to false" in str(raised.value)
    assert "the log now starts at 15" in str(raised.value)

    options = {"failOnDataLoss": "false"}
    assert run_available_now(spark, bootstrap, topic, tmp_path, **options) == [5]
    assert read_output(spark, tmp_path) == expected(topic, {0: [*range(10), *range(15, 20)]})
