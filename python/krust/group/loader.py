"""Rebuilding groups and offsets from a `__consumer_offsets` partition, like Kafka's loader.

Records are applied in log order: a later record replaces an earlier one with the same key and a
tombstone deletes. Offsets of a group without group metadata make a "simple" group (one that only
stores offsets), so it can be listed, fetched and expired like in Kafka.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from krust.group.coordinator_log import CoordinatorLog
from krust.group.group import ClassicGroup
from krust.group.offsets import OffsetStore
from krust.group.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey

log = logging.getLogger(__name__)


@dataclass
class LoadedPartition:
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)
    records: int = 0
    skipped: int = 0


async def load_partition(
    coordinator_log: CoordinatorLog, partition: int, chunk_bytes: int, now_ms: int
) -> LoadedPartition:
    loaded = LoadedPartition()
    group_values: dict[str, GroupMetadataValue | None] = {}
    async for offset, record in coordinator_log.read(partition, chunk_bytes):
        loaded.records += 1
        if isinstance(record, Exception):
            # Left in the log untouched; one bad record must not make the partition unusable.
            log.warning(
                "__consumer_offsets-%d offset %d: skipping undecodable record: %s",
                partition,
                offset,
                record,
            )
            loaded.skipped += 1
            continue
        if record is None:
            continue
        key, value = record
        if isinstance(key, OffsetCommitKey):
            assert not isinstance(value, GroupMetadataValue)
            loaded.offsets.apply(key, value)
        elif isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            group_values[key.group] = value
    for group_id, value in group_values.items():
        if value is not None:
            loaded.groups[group_id] = ClassicGroup.from_record(group_id, value)
    for group_id in loaded.offsets.group_ids():
        if group_id not in loaded.groups:
            loaded.groups[group_id] = ClassicGroup(group_id, now_ms)
    return loaded
