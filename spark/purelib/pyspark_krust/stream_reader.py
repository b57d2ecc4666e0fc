"""`spark.readStream.format("krust")`: micro-batches over offset ranges, with the connector's
JSON offsets (`{"topic":{"0":23}}`) in the checkpoint, `maxOffsetsPerTrigger` admission
control and `Trigger.AvailableNow`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from krust._core import KafkaClient
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .batch_reader import read_range
from .errors import explained, explained_rows
from .offsets import (
    PartitionOffsets,
    TopicPartition,
    from_json_offsets,
    resolve,
    subscribed_partitions,
    to_json_offsets,
)
from .options import STARTING_OFFSETS, OffsetChoice, read_options
from .ranges import offset_ranges

JsonOffsets = dict[str, dict[str, int]]


def admit(starts: PartitionOffsets, latest: PartitionOffsets, max_rows: int) -> PartitionOffsets:
    """End offsets that admit at most `max_rows` records, shared among partitions in
    proportion to their backlog, as the connector's `maxOffsetsPerTrigger` does."""
    backlog = {tp: max(0, end - starts[tp]) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: size * max_rows // total for tp, size in backlog.items()}
    # Integer shares round down: hand out what is left one offset at a time, in a fixed order.
    left = max_rows - sum(shares.values())
    for tp in sorted(backlog):
        if left == 0:
            break
        if shares[tp] < backlog[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: starts[tp] + shares[tp] for tp in latest}


class KrustStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = read_options(options, streaming=True)
        # Trigger.AvailableNow: the latest offsets when the query started, never read past.
        self.available_now: PartitionOffsets | None = None

    def _client(self) -> KafkaClient:
        return self.options.cluster.client()

    def _resolve(
        self, client: KafkaClient, partitions: Sequence[TopicPartition], choice: OffsetChoice
    ) -> PartitionOffsets:
        return resolve(
            client, partitions, choice, STARTING_OFFSETS, read_committed=self.options.read_committed
        )

    @explained
    def initialOffset(self) -> JsonOffsets:
        client = self._client()
        partitions = subscribed_partitions(client, self.options.subscription)
        return to_json_offsets(self._resolve(client, partitions, self.options.starting))

    def _starts(self, client: KafkaClient, start: JsonOffsets) -> PartitionOffsets:
        """`start` plus partitions that appeared since (added partitions, newly matching
        topics), which are read from their earliest offset."""
        known = from_json_offsets(start)
        current = subscribed_partitions(client, self.options.subscription)
        added = [tp for tp in current if tp not in known]
        return {**known, **self._resolve(client, added, "earliest")}

    def _latest(
        self, client: KafkaClient, partitions: Sequence[tuple[str, int]]
    ) -> PartitionOffsets:
        return self._resolve(client, partitions, "latest")

    @explained
    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        client = self._client()
        starts = self._starts(client, start)
        latest = self._latest(client, list(starts))
        if self.available_now is not None:
            latest = {
                tp: min(end, self.available_now.get(tp, starts[tp])) for tp, end in latest.items()
            }
        latest = {tp: max(end, starts[tp]) for tp, end in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = admit(starts, latest, limit.max_rows)
        return to_json_offsets(latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    @explained
    def prepareForTriggerAvailableNow(self) -> None:
        client = self._client()
        partitions = subscribed_partitions(client, self.options.subscription)
        self.available_now = self._latest(client, partitions)

    @explained
    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        ends = from_json_offsets(end)
        starts = from_json_offsets(start)
        added = [tp for tp in ends if tp not in starts]
        if added:
            starts.update(self._resolve(self._client(), added, "earliest"))
        return offset_ranges(starts, ends, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return explained_rows(read_range(self.options, partition))

    def commit(self, end: JsonOffsets) -> None:
        """Kafka keeps the data; the checkpoint, not the broker, records progress (as with the
        connector, nothing is committed to a consumer group)."""
