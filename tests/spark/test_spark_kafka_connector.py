"""Spark's own Kafka connector (`format("kafka")`, the JVM jar) reads and writes krust, batch
and streaming, and agrees with `format("krust")`: a regression test for krust as a broker."""

from __future__ import annotations

import json
from pathlib import Path

from integration.broker_process import BrokerProcess
from integration.clients.confluent import ConfluentKafkaClient, create_topic
from integration.records import Record
from pyspark.sql import DataFrame, SparkSession

from .conftest import SPARK_KAFKA_JARS

QUERY_TIMEOUT_S = 120
COLUMNS = ("partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers")


def rows(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted(tuple(row) for row in df.selectExpr(*COLUMNS).collect())


def load(spark: SparkSession, source: str, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.read.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )


def test_the_connector_jars_are_installed() -> None:
    names = {jar.name.split("_2.13")[0] for jar in SPARK_KAFKA_JARS}
    assert "spark-sql-kafka-0-10" in names, "run scripts/install-test-deps.sh"


def test_spark_kafka_reads_what_krust_reads(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-connector-read"
    create_topic(bootstrap, topic, partitions=2)
    for partition in (0, 1):
        records = [
            Record(f"k{i}".encode(), f"{partition}-{i}".encode(), (("h", b"x"),), 1_700_000 + i)
            for i in range(15)
        ]
        ConfluentKafkaClient().produce(bootstrap, topic, partition, records, "zstd")

    via_kafka = rows(load(spark, "kafka", bootstrap, topic))
    assert len(via_kafka) == 30
    assert via_kafka == rows(load(spark, "krust", bootstrap, topic))


def test_spark_kafka_writes_what_krust_reads_back(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-connector-write"
    create_topic(bootstrap, topic)
    written = [(f"k{i}", f"v{i}") for i in range(20)]
    (
        spark.createDataFrame(written, "key string, value string")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    read = load(spark, "krust", bootstrap, topic).selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
    )
    assert sorted(tuple(row) for row in read.collect()) == sorted(written)


def test_spark_kafka_streams_from_and_to_krust(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = spark_broker.bootstrap
    source, sink = "spark-connector-stream-in", "spark-connector-stream-out"
    for topic in (source, sink):
        create_topic(bootstrap, topic)
    records = [Record(None, json.dumps({"n": i}).encode()) for i in range(25)]
    ConfluentKafkaClient().produce(bootstrap, source, 0, records, "lz4")

    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .selectExpr("value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not finish"
    assert query.exception() is None
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert batches == [10, 10, 5]
    copied = load(spark, "krust", bootstrap, sink).select("value").collect()
    assert sorted(bytes(row.value) for row in copied) == sorted(r.value or b"" for r in records)
