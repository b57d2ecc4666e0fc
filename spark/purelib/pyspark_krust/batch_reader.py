"""`spark.read.format("krust")`: the driver plans offset ranges, each task reads its range
through the native client as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from krust._core import DataLossError, PartitionReader
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .errors import explained, explained_rows
from .offsets import check_start_not_past_end, resolve, subscribed_partitions
from .options import ENDING_OFFSETS, FAIL_ON_DATA_LOSS, STARTING_OFFSETS, ReadOptions, read_options
from .ranges import OffsetRange, offset_ranges


class KrustBatchReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = read_options(options, streaming=False)

    @explained
    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        client = options.cluster.client()
        partitions = subscribed_partitions(client, options.subscription)
        committed = options.read_committed
        starts = resolve(
            client, partitions, options.starting, STARTING_OFFSETS, read_committed=committed
        )
        ends = resolve(client, partitions, options.ending, ENDING_OFFSETS, read_committed=committed)
        check_start_not_past_end(starts, ends)
        return offset_ranges(starts, ends, options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return explained_rows(read_range(self.options, partition))


def read_range(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The rows of one offset range, batch by batch, decoded in Rust. Offsets that retention
    or DeleteRecords removed fail the task, or with failOnDataLoss=false are skipped: reading
    goes on from the partition's new earliest offset, as in Spark's connector."""
    if not isinstance(partition, OffsetRange):
        # Spark reads one empty InputPartition(None) when partitions() planned none.
        return
    topic, number = partition.topic, partition.partition
    start = partition.start
    while start < partition.end:
        reader = PartitionReader(
            options.cluster.bootstrap_servers,
            topic,
            number,
            start,
            partition.end,
            options.include_headers,
            options.read_committed,
            dict(options.cluster.settings),
        )
        try:
            while (batch := reader.next_batch()) is not None:
                yield pa.record_batch(batch)
            return
        except DataLossError as e:
            if options.fail_on_data_loss:
                raise DataLossError(
                    f"{e}. Some data may have been lost; to skip it and go on, set the option "
                    f"{FAIL_ON_DATA_LOSS} to false."
                ) from None
            # Everything before the failed fetch was read; the log now starts after it.
            [earliest] = options.cluster.client().list_offsets(topic, [number], "earliest")
            if earliest is None or earliest <= start:
                raise
            start = earliest
