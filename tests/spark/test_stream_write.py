"""`writeStream.format("krust")`: a streaming query's rows land in the topic exactly once when
nothing fails; a Kafka consumer reads them."""

from __future__ import annotations

import json
from pathlib import Path

from integration.broker_process import BrokerProcess
from integration.clients.confluent import create_topic
from pyspark.sql import SparkSession

from .conftest import consume_partition

QUERY_TIMEOUT_S = 120


def write_json_files(directory: Path, name: str, values: range) -> None:
    directory.mkdir(exist_ok=True)
    lines = (json.dumps({"key": f"k{i}", "value": f"v{i}"}) for i in values)
    (directory / name).write_text("\n".join(lines) + "\n")


def stream_files_to_topic(spark: SparkSession, source: Path, bootstrap: str, topic: str) -> None:
    query = (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", "1")
        .json(str(source))
        .writeStream.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(source.parent / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not finish"
    assert query.exception() is None


def test_a_file_stream_lands_in_the_topic_once(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-stream-write"
    create_topic(bootstrap, topic)
    source = tmp_path / "in"
    write_json_files(source, "a.json", range(0, 10))
    write_json_files(source, "b.json", range(10, 25))
    stream_files_to_topic(spark, source, bootstrap, topic)
    # A new file and a restart from the checkpoint: only the new file's rows are written.
    write_json_files(source, "c.json", range(25, 30))
    stream_files_to_topic(spark, source, bootstrap, topic)

    consumed = consume_partition(bootstrap, topic, 0)
    got = sorted((c.record.key or b"", c.record.value or b"") for c in consumed)
    assert got == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(30))
