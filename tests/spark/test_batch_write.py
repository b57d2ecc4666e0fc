"""`df.write.format("krust")` produces exactly the rows written; a Kafka consumer reads them."""

from __future__ import annotations

import pytest
from integration.broker_process import BrokerProcess
from integration.clients.confluent import create_topic
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from .conftest import consume_partition

SINK_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", StringType()),
        StructField("partition", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


def test_written_rows_are_read_back_by_a_kafka_consumer(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-write"
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    rows = [
        (
            None if i % 4 == 3 else f"key-{i}".encode(),
            None if i == 7 else f"value {i} ✓",
            i % 2,
            [("seq", str(i).encode()), ("seq", b"again")] if i % 3 == 0 else [],
        )
        for i in range(40)
    ]
    (
        spark.createDataFrame(rows, SINK_SCHEMA)
        .repartition(2)
        .write.format("krust")
        .mode("append")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("topic", topic)
        .option("kafka.compression.type", "zstd")
        .save()
    )

    for partition in (0, 1):
        expected = {
            (key, None if value is None else value.encode(), tuple(headers))
            for key, value, p, headers in rows
            if p == partition
        }
        consumed = consume_partition(spark_broker.bootstrap, topic, partition)
        got = [(c.record.key, c.record.value, c.record.headers) for c in consumed]
        assert len(got) == len(expected), f"partition {partition}: every row exactly once"
        assert set(got) == expected
        assert [c.offset for c in consumed] == list(range(len(expected)))


def test_a_topic_column_routes_each_row(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topics = ("spark-write-route-a", "spark-write-route-b")
    for topic in topics:
        create_topic(spark_broker.bootstrap, topic)
    df = spark.createDataFrame(
        [(topics[i % 2], f"v{i}") for i in range(10)], "topic string, value string"
    )
    df.write.format("krust").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap
    ).save()

    for n, topic in enumerate(topics):
        consumed = consume_partition(spark_broker.bootstrap, topic, 0)
        assert sorted(c.record.value or b"" for c in consumed) == sorted(
            f"v{i}".encode() for i in range(n, 10, 2)
        )


def test_more_than_a_batch_of_rows_without_keys_is_written_whole(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    # Spark hands the sink 10,000 rows per Arrow batch, and rows without a key share one
    # partition: 20,000 values of 100 bytes are more than the broker takes in one batch (1 MiB).
    topic, rows = "spark-write-large", 20_000
    create_topic(spark_broker.bootstrap, topic)
    spark.range(0, rows, 1, numPartitions=1).selectExpr(
        "CAST(lpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value"
    ).write.format("krust").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap
    ).option("topic", topic).save()

    read = (
        spark.read.format("krust")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", topic)
        .load()
    )
    ids = read.selectExpr("CAST(TRIM(LEADING 'x' FROM CAST(value AS STRING)) AS LONG) AS id")
    assert sorted(row.id for row in ids.collect()) == list(range(rows))


def test_writing_to_a_missing_topic_creates_it_as_a_producer_would(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-write-auto-created"
    df = spark.createDataFrame([(f"v{i}",) for i in range(5)], "value string")
    df.write.format("krust").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap
    ).option("topic", topic).save()

    consumed = consume_partition(spark_broker.bootstrap, topic, 0)
    assert sorted(c.record.value or b"" for c in consumed) == [f"v{i}".encode() for i in range(5)]


def test_a_partition_outside_the_topic_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-write-bad-partition"
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    df = spark.createDataFrame([("v", 2)], "value string, partition int")
    with pytest.raises(PySparkException) as raised:
        df.write.format("krust").mode("append").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).option("topic", topic).save()
    # Spark's first line says a Python worker failed; the cause is the next, not a traceback.
    lines = str(raised.value).splitlines()
    assert f"partition 2 is not in topic {topic}'s range [0, 2)" in lines[1], lines


def test_a_headers_column_of_literals_is_accepted(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    # F.struct of literals gives non-nullable fields; Spark's connector ignores nullability.
    topic = "spark-write-literal-headers"
    create_topic(spark_broker.bootstrap, topic)
    header = F.struct(F.lit("origin").alias("key"), F.lit(b"spark").alias("value"))
    df = spark.range(3).select(
        F.col("id").cast("string").alias("value"), F.array(header).alias("headers")
    )
    df.write.format("krust").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap
    ).option("topic", topic).save()

    consumed = consume_partition(spark_broker.bootstrap, topic, 0)
    assert sorted((c.record.value, c.record.headers) for c in consumed) == [
        (str(i).encode(), (("origin", b"spark"),)) for i in range(3)
    ]


def test_a_headers_column_of_another_type_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    header = F.struct(F.lit(1).alias("key"), F.lit(b"v").alias("value"))
    df = spark.range(1).select(F.lit("v").alias("value"), F.array(header).alias("headers"))
    with pytest.raises(PySparkException) as raised:
        df.write.format("krust").mode("append").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).option("topic", "t").save()
    assert "column headers must be array<struct<key:string,value:binary>>" in str(raised.value)
