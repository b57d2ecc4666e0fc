"""The metadata log: KRaft's `__cluster_metadata` partition 0 and its snapshots, read and
written through the core."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from krust.context import CoreBroker
from krust.controller.records import (
    MetadataRecord,
    MetadataRecordError,
    decode_record,
    encode_record,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
READ_MAX_BYTES = 1 << 20


class MetadataLog:
    """Appends metadata records durably and reads them back in offset order."""

    def __init__(self, core: CoreBroker) -> None:
        self._core = core

    def end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._core.log_end_offset(METADATA_TOPIC, METADATA_PARTITION)

    def append(self, records: Sequence[MetadataRecord]) -> tuple[int, int]:
        """Append records as one batch (flushed to disk); the offset of the first and the
        bytes of the records."""
        values = [encode_record(record) for record in records]
        base = self._core.internal_append(
            METADATA_TOPIC, METADATA_PARTITION, [(None, value) for value in values]
        )
        return base, sum(len(value) for value in values)

    def latest_snapshot(self) -> tuple[int, list[MetadataRecord]] | None:
        """The newest snapshot: the offset it ends at (the log goes on from there) and its
        records; None before the first."""
        snapshot = self._core.latest_metadata_snapshot()
        if snapshot is None:
            return None
        end_offset, values = snapshot
        where = f"the snapshot ending at {end_offset}"
        return end_offset, [_decode(where, value) for value in values]

    def write_snapshot(self, end_offset: int, records: Sequence[MetadataRecord]) -> str:
        """Write a snapshot standing in for every record below `end_offset`; its path."""
        values = [encode_record(record) for record in records]
        return self._core.write_metadata_snapshot(end_offset, values)

    def read_from(self, start: int) -> Iterator[tuple[int, MetadataRecord]]:
        """Every record from offset `start` on, with its offset."""
        log_start = self._core.log_start_offset(METADATA_TOPIC, METADATA_PARTITION)
        if start < log_start:
            raise MetadataRecordError(
                f"{METADATA_TOPIC} starts at offset {log_start} but no snapshot covers the "
                f"records before it (replay would start at {start})"
            )
        end = self.end_offset()
        next_offset = start
        while next_offset < end:
            stored = self._core.internal_read(
                METADATA_TOPIC, METADATA_PARTITION, next_offset, READ_MAX_BYTES
            )
            progressed = False
            for entry in stored:
                offset = entry["offset"]
                # A read from inside a batch starts at the batch's first record.
                if offset < next_offset:
                    continue
                yield offset, _decode(f"offset {offset}", entry["value"])
                next_offset = offset + 1
                progressed = True
            if not progressed:
                raise MetadataRecordError(
                    f"{METADATA_TOPIC}: nothing readable at offset {next_offset} (end {end})"
                )


def _decode(where: str, value: bytes | None) -> MetadataRecord:
    if value is None:
        raise MetadataRecordError(f"{METADATA_TOPIC} {where}: record without a value")
    try:
        return decode_record(value)
    except MetadataRecordError as error:
        raise MetadataRecordError(f"{METADATA_TOPIC} {where}: {error}") from None
