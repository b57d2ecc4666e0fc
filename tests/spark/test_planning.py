"""The driver-side planning of the data source, without Spark: offset ranges split for
minPartitions and maxOffsetsPerTrigger's share of each partition."""

from __future__ import annotations

from itertools import pairwise

from pyspark_krust.ranges import OffsetRange, offset_ranges
from pyspark_krust.stream_reader import admit


def test_min_partitions_splits_ranges_in_proportion_and_covers_them_exactly() -> None:
    starts = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    ends = {("t", 0): 900, ("t", 1): 200, ("t", 2): 7}
    ranges = offset_ranges(starts, ends, min_partitions=10)
    by_partition: dict[int, list[OffsetRange]] = {}
    for r in ranges:
        by_partition.setdefault(r.partition, []).append(r)
    assert sorted(by_partition) == [0, 1], "an empty range is no task"
    assert len(by_partition[0]) == 9 and len(by_partition[1]) == 1
    for partition, parts in by_partition.items():
        parts.sort(key=lambda r: r.start)
        assert parts[0].start == starts[("t", partition)]
        assert parts[-1].end == ends[("t", partition)]
        assert all(a.end == b.start for a, b in pairwise(parts))


def test_without_min_partitions_each_partition_is_one_range() -> None:
    ranges = offset_ranges({("t", 0): 5, ("u", 0): 0}, {("t", 0): 10, ("u", 0): 1}, None)
    assert ranges == [OffsetRange("t", 0, 5, 10), OffsetRange("u", 0, 0, 1)]


def test_max_offsets_are_shared_by_backlog_and_never_exceeded() -> None:
    starts = {("t", 0): 10, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 40, ("t", 1): 10, ("t", 2): 50}
    ends = admit(starts, latest, 20)
    admitted = {tp: ends[tp] - starts[tp] for tp in starts}
    assert sum(admitted.values()) == 20
    assert admitted[("t", 2)] == 0
    assert admitted[("t", 0)] > admitted[("t", 1)] > 0
    assert all(ends[tp] <= latest[tp] for tp in latest)
    assert admit(starts, latest, 1_000) == latest
