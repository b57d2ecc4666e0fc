"""Offset ranges to read and their split into Spark input partitions (`minPartitions`)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from pyspark.sql.datasource import InputPartition

from .offsets import PartitionOffsets


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets `[start, end)` of one partition: one Spark task reads it."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def offset_ranges(
    starts: PartitionOffsets, ends: PartitionOffsets, min_partitions: int | None
) -> list[OffsetRange]:
    """One range per partition with data between its start and end, split further when
    `min_partitions` asks for more tasks than partitions: as Spark's connector does, large
    ranges are cut in proportion to their share of all offsets."""
    ranges = [
        OffsetRange(topic, partition, start, ends[(topic, partition)])
        for (topic, partition), start in sorted(starts.items())
        if (topic, partition) in ends and ends[(topic, partition)] > start
    ]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    split: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, round(r.size / total * min_partitions))
        bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
        split.extend(
            OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in pairwise(bounds) if hi > lo
        )
    return split
