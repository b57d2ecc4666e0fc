"""The data source works against Apache Kafka itself, not only krust: the same checks as against
krust (reads of every codec, a write a Kafka consumer reads back, streaming offsets, a restart
from a checkpoint, partitions added and records deleted under a query), run on an Apache Kafka
broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.apache_kafka import ApacheKafka, apache_kafka
from integration.records import CODECS
from pyspark.sql import SparkSession

from . import test_batch_read, test_batch_write, test_stream_read


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    yield from apache_kafka(tmp_path_factory.mktemp("apache-kafka"))


@pytest.mark.parametrize("codec", CODECS)
def test_every_record_reads_back_as_written(
    spark: SparkSession, kafka: ApacheKafka, codec: str
) -> None:
    test_batch_read.test_every_record_reads_back_as_written(spark, kafka, codec)


def test_written_rows_are_read_back_by_a_kafka_consumer(
    spark: SparkSession, kafka: ApacheKafka
) -> None:
    test_batch_write.test_written_rows_are_read_back_by_a_kafka_consumer(spark, kafka)


def test_max_offsets_per_trigger_splits_and_a_restart_reads_only_new_records(
    spark: SparkSession, kafka: ApacheKafka, tmp_path: Path
) -> None:
    test_stream_read.test_max_offsets_per_trigger_splits_and_a_restart_reads_only_new_records(
        spark, kafka, tmp_path
    )


def test_a_partition_added_while_the_query_runs_is_read_from_its_start(
    spark: SparkSession, kafka: ApacheKafka, tmp_path: Path
) -> None:
    test_stream_read.test_a_partition_added_while_the_query_runs_is_read_from_its_start(
        spark, kafka, tmp_path
    )


def test_records_deleted_before_they_were_read(
    spark: SparkSession, kafka: ApacheKafka, tmp_path: Path
) -> None:
    test_stream_read.test_records_deleted_before_they_were_read(spark, kafka, tmp_path)
