"""The metadata log: KRaft's `__cluster_metadata` partition 0, read and written through the core."""

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

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append records as one batch (flushed to disk); the offset of the first."""
        values = [(None, encode_record(record)) for record in records]
        return self._core.internal_append(METADATA_TOPIC, METADATA_PARTITION, values)

    def read_all(self) -> Iterator[tuple[int, MetadataRecord]]:
        """Every record from the start of the log, with its offset."""
        end = self.end_offset()
        next_offset = 0
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
                yield offset, _decode(offset, entry["value"])
                next_offset = offset + 1
                progressed = True
            if not progressed:
                raise MetadataRecordError(
                    f"{METADATA_TOPIC}: nothing readable at offset {next_offset} (end {end})"
                )


def _decode(offset: int, value: bytes | None) -> MetadataRecord:
    if value is None:
        raise MetadataRecordError(f"{METADATA_TOPIC} offset {offset}: record without a value")
    try:
        return decode_record(value)
    except MetadataRecordError as error:
        raise MetadataRecordError(f"{METADATA_TOPIC} offset {offset}: {error}") from None
