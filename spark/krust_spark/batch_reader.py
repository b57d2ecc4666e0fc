"""`spark.read.format("krust")`: the driver plans offset ranges, each task reads its range
through the native client as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from krust._core import KafkaClient, PartitionReader
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .offsets import resolve, subscribed_partitions
from .options import ENDING_OFFSETS, STARTING_OFFSETS, read_options
from .ranges import OffsetRange, offset_ranges


class KrustBatchReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = read_options(options, streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        client = KafkaClient(options.bootstrap_servers)
        partitions = subscribed_partitions(client, options.subscription)
        starts = resolve(client, partitions, options.starting, STARTING_OFFSETS)
        ends = resolve(client, partitions, options.ending, ENDING_OFFSETS)
        return offset_ranges(starts, ends, options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options.bootstrap_servers, partition, self.options.include_headers)


def read_range(
    bootstrap_servers: str, partition: InputPartition, include_headers: bool
) -> Iterator[pa.RecordBatch]:
    """The rows of one offset range, batch by batch, decoded in Rust."""
    assert isinstance(partition, OffsetRange)
    reader = PartitionReader(
        bootstrap_servers,
        partition.topic,
        partition.partition,
        partition.start,
        partition.end,
        include_headers,
    )
    while (batch := reader.next_batch()) is not None:
        yield pa.record_batch(batch)
