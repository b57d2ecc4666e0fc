"""Rebuilding groups and offsets from a `__consumer_offsets` partition, like Kafka's loader.

Records are applied in log order: a later record replaces an earlier one with the same key and a
tombstone deletes. Offsets of a group without group metadata make a "simple" group (one that only
stores offsets), so it can be listed, fetched and expired like in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from krust.coordinator.loader import ReplayStats, replay
from krust.coordinator.log import CoordinatorLog
from krust.group.consumer.records import ConsumerGroupKey
from krust.group.group import ClassicGroup
from krust.group.offsets import OffsetStore
from krust.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from krust.group.transactional_offsets import TransactionalOffsets


@dataclass
class LoadedPartition:
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)
    stats: ReplayStats = field(default_factory=ReplayStats)
    # Offsets of transactions with no marker yet at the end of the log.
    transactional: TransactionalOffsets = field(init=False)

    def __post_init__(self) -> None:
        self.transactional = TransactionalOffsets(lambda record: self.offsets.apply(*record))


async def load_partition(
    coordinator_log: CoordinatorLog[CoordinatorRecord],
    partition: int,
    chunk_bytes: int,
    now_ms: int,
) -> LoadedPartition:
    loaded = LoadedPartition()
    group_values: dict[str, GroupMetadataValue | None] = {}

    def apply(record: CoordinatorRecord) -> None:
        key, value = record
        if isinstance(key, ConsumerGroupKey):
            # KIP-848 consumer groups' records are skipped here, as they were before the codec
            # decoded them: this loader rebuilds classic groups and offsets only.
            return
        if isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue | None):
            loaded.offsets.apply(key, value)
        elif isinstance(key, GroupMetadataKey) and isinstance(value, GroupMetadataValue | None):
            group_values[key.group] = value
        else:
            raise ValueError(f"{type(key).__name__} with a {type(value).__name__}")

    loaded.stats = await replay(
        coordinator_log, partition, chunk_bytes, apply, loaded.transactional
    )
    for group_id, value in group_values.items():
        if value is not None:
            loaded.groups[group_id] = ClassicGroup.from_record(group_id, value)
    for group_id in loaded.offsets.group_ids():
        if group_id not in loaded.groups:
            loaded.groups[group_id] = ClassicGroup(group_id, now_ms)
    return loaded
