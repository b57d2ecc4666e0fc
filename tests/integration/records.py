"""Records as every client sees them, sample data, and the comparison all round-trip tests use."""

from __future__ import annotations

import time
from dataclasses import dataclass

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    # CreateTime set by the producer in ms; None when the client cannot choose it (kcat), in
    # which case the producer's clock during the produce call is checked instead.
    timestamp: int | None = None


@dataclass(frozen=True)
class Consumed:
    offset: int
    record: Record


@dataclass(frozen=True)
class ProducedBatch:
    """What a producer wrote and when: the expectation for whoever reads it back."""

    records: list[Record]
    started_ms: int
    finished_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def sample_records(
    count: int,
    *,
    tag: str,
    per_record_headers: bool = True,
    with_timestamps: bool = True,
) -> list[Record]:
    """Keyed records of varied sizes: text, non-ASCII text, a null key, a null value (tombstone).

    Values are UTF-8 text so every client (kcat prints them) can carry them unchanged; they are
    repetitive enough that each codec really compresses them. `per_record_headers=False` gives
    every record the same headers (kcat's -H applies to all records it sends).
    """
    base_ms = now_ms() - 10 * 60 * 1000
    records = []
    for i in range(count):
        tombstone = i == count // 2
        # A tombstone keeps its key (kafka-python refuses a record with neither).
        key = None if i % 7 == 3 and not tombstone else f"{tag}-key-{i}".encode()
        if tombstone:
            value = None
        else:
            body = f"{tag} value {i} ünïcødé ✓ " + "abcdefghij" * ((i * 37) % 300)
            value = body.encode()
        if per_record_headers:
            headers: Headers = (("seq", str(i).encode()), ("tag", tag.encode()))
            if i % 5 == 0:
                headers = ()
            elif i % 5 == 1:
                headers += (("seq", b"duplicate header names keep their order"),)
        else:
            headers = (("tag", tag.encode()), ("client", b"kcat"))
        timestamp = base_ms + i * 1000 if with_timestamps else None
        records.append(Record(key, value, headers, timestamp))
    return records


def assert_read_back(
    produced: ProducedBatch, consumed: list[Consumed], base_offset: int = 0
) -> None:
    """The consumer saw exactly what was produced, in order, at contiguous offsets."""
    assert len(consumed) == len(produced.records), (
        f"read {len(consumed)} records, produced {len(produced.records)}"
    )
    assert [c.offset for c in consumed] == list(
        range(base_offset, base_offset + len(produced.records))
    )
    for i, (expected, got) in enumerate(zip(produced.records, consumed, strict=True)):
        actual = got.record
        assert actual.key == expected.key, f"record {i}: key"
        assert actual.value == expected.value, f"record {i}: value"
        assert actual.headers == expected.headers, f"record {i}: headers"
        if expected.timestamp is not None:
            assert actual.timestamp == expected.timestamp, f"record {i}: timestamp"
        else:
            assert actual.timestamp is not None
            assert produced.started_ms <= actual.timestamp <= produced.finished_ms, (
                f"record {i}: timestamp {actual.timestamp} outside the produce call "
                f"[{produced.started_ms}, {produced.finished_ms}]"
            )
