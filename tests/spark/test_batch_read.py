"""`spark.read.format("krust")` returns every record exactly as a Kafka client wrote it."""

from __future__ import annotations

import pytest
from integration.broker_process import BrokerProcess
from integration.clients.confluent import ConfluentKafkaClient, create_topic
from integration.records import CODECS, Record, sample_records
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

PARTITIONS = 2
RECORDS_PER_PARTITION = 25


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("krust").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_by_position(df: DataFrame) -> dict[tuple[int, int], tuple[object, ...]]:
    """(partition, offset) -> (key, value, headers, timestamp ms, timestampType, topic)."""
    rows = df.selectExpr(
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        "unix_millis(timestamp) AS ts",
        "timestampType",
        "topic",
    ).collect()
    return {
        (row.partition, row.offset): (
            None if row.key is None else bytes(row.key),
            None if row.value is None else bytes(row.value),
            tuple((h.key, bytes(h.value)) for h in row.headers),
            row.ts,
            row.timestampType,
            row.topic,
        )
        for row in rows
    }


def produce(bootstrap: str, topic: str, codec: str) -> dict[int, list[Record]]:
    written = {}
    for partition in range(PARTITIONS):
        records = sample_records(RECORDS_PER_PARTITION, tag=f"{topic}-{partition}")
        ConfluentKafkaClient().produce(bootstrap, topic, partition, records, codec)
        written[partition] = records
    return written


@pytest.mark.parametrize("codec", CODECS)
def test_every_record_reads_back_as_written(
    spark: SparkSession, spark_broker: BrokerProcess, codec: str
) -> None:
    topic = f"spark-read-{codec}"
    create_topic(spark_broker.bootstrap, topic, partitions=PARTITIONS)
    written = produce(spark_broker.bootstrap, topic, codec)

    df = read(spark, spark_broker.bootstrap, subscribe=topic, includeHeaders="true")
    got = rows_by_position(df)

    expected = {
        (partition, offset): (
            record.key,
            record.value,
            record.headers,
            record.timestamp,
            0,  # CreateTime
            topic,
        )
        for partition, records in written.items()
        for offset, record in enumerate(records)
    }
    assert got == expected


def test_read_committed_reads_records_outside_transactions(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    # krust has no transactions yet: read_committed must still read every plain record, up to
    # the last stable offset (the high watermark here). Aborted transactions are left out by
    # krust-client's own tests.
    topic = "spark-read-committed"
    create_topic(spark_broker.bootstrap, topic, partitions=PARTITIONS)
    written = produce(spark_broker.bootstrap, topic, "snappy")
    df = read(
        spark,
        spark_broker.bootstrap,
        subscribe=topic,
        includeHeaders="true",
        **{"kafka.isolation.level": "read_committed"},
    )
    assert len(rows_by_position(df)) == sum(len(records) for records in written.values())


def test_offset_json_and_min_partitions_select_exactly_the_range(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-read-range"
    create_topic(spark_broker.bootstrap, topic, partitions=PARTITIONS)
    produce(spark_broker.bootstrap, topic, "lz4")

    df = read(
        spark,
        spark_broker.bootstrap,
        assign=f'{{"{topic}":[0,1]}}',
        startingOffsets=f'{{"{topic}":{{"0":5,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":12,"1":-1}}}}',
        minPartitions="6",
    )
    assert df.rdd.getNumPartitions() >= 6
    offsets = sorted(
        (row.partition, row.offset) for row in df.select("partition", "offset").collect()
    )
    assert offsets == [(0, o) for o in range(5, 12)] + [
        (1, o) for o in range(RECORDS_PER_PARTITION)
    ]
    assert "headers" not in df.columns


def test_subscribe_pattern_reads_the_matching_topics_only(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    for topic in ("spark-pattern-a", "spark-pattern-b", "spark-other-c"):
        create_topic(spark_broker.bootstrap, topic)
        ConfluentKafkaClient().produce(
            spark_broker.bootstrap, topic, 0, [Record(None, topic.encode())], "none"
        )
    df = read(spark, spark_broker.bootstrap, subscribePattern="spark-pattern-.*")
    assert sorted(bytes(row.value) for row in df.select("value").collect()) == [
        b"spark-pattern-a",
        b"spark-pattern-b",
    ]


def first_at_or_after(records: list[Record], timestamp: int) -> int:
    return next(i for i, r in enumerate(records) if (r.timestamp or 0) >= timestamp)


def test_offsets_by_timestamp_start_and_end_at_the_first_record_at_or_after_them(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-read-by-time"
    create_topic(spark_broker.bootstrap, topic, partitions=PARTITIONS)
    written = produce(spark_broker.bootstrap, topic, "gzip")
    start_0, start_1 = written[0][10].timestamp, written[1][3].timestamp
    end = written[0][20].timestamp
    assert start_0 is not None and start_1 is not None and end is not None

    df = read(
        spark,
        spark_broker.bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{start_0},"1":{start_1}}}}}',
        endingTimestamp=str(end),
    )
    offsets = sorted(
        (row.partition, row.offset) for row in df.select("partition", "offset").collect()
    )
    assert offsets == [(0, o) for o in range(10, 20)] + [
        (1, o) for o in range(3, first_at_or_after(written[1], end))
    ]


def test_a_starting_timestamp_after_every_record_fails_unless_the_strategy_is_latest(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-read-future"
    create_topic(spark_broker.bootstrap, topic)
    ConfluentKafkaClient().produce(spark_broker.bootstrap, topic, 0, [Record(None, b"v")], "none")
    future = str(2**41)
    with pytest.raises(PySparkException) as raised:
        read(spark, spark_broker.bootstrap, subscribe=topic, startingTimestamp=future).collect()
    assert f"option startingTimestamp: no record of {topic}-0 has a timestamp" in str(raised.value)

    df = read(
        spark,
        spark_broker.bootstrap,
        subscribe=topic,
        startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0
