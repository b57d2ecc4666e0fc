"""Rebuilding groups and offsets from a `__consumer_offsets` partition, like Kafka's loader.

Records are applied in log order: a later record replaces an earlier one with the same key and a
tombstone deletes. Offsets of a group without group metadata make a "simple" group (one that only
stores offsets), so it can be listed, fetched and expired like in Kafka. KIP-848 consumer groups
are rebuilt by applying their records to a ConsumerGroup, as the live coordinator does; a
group id's last group record decides whether it is a classic or a consumer group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from krust.coordinator.loader import ReplayStats, replay
from krust.coordinator.log import CoordinatorLog
from krust.group.classic.group import ClassicGroup
from krust.group.consumer.group import ConsumerGroup
from krust.group.consumer_group_records import ConsumerGroupKey
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
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
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
        if isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue | None):
            loaded.offsets.apply(key, value)
        elif isinstance(key, GroupMetadataKey) and isinstance(value, GroupMetadataValue | None):
            group_values[key.group] = value
            if value is not None:
                loaded.consumer_groups.pop(key.group, None)
        elif isinstance(key, ConsumerGroupKey):
            group = loaded.consumer_groups.get(key.group_id)
            if group is None:
                group = loaded.consumer_groups[key.group_id] = ConsumerGroup(key.group_id)
                group_values.pop(key.group_id, None)
            group.apply(record)
        else:
            raise ValueError(f"{type(key).__name__} with a {type(value).__name__}")

    loaded.stats = await replay(
        coordinator_log, partition, chunk_bytes, apply, loaded.transactional
    )
    for group_id, value in group_values.items():
        if value is not None:
            loaded.groups[group_id] = ClassicGroup.from_record(group_id, value)
    for group_id, consumer_group in list(loaded.consumer_groups.items()):
        if consumer_group.deleted:
            del loaded.consumer_groups[group_id]
    for group_id in loaded.offsets.group_ids():
        if group_id not in loaded.groups and group_id not in loaded.consumer_groups:
            loaded.groups[group_id] = ClassicGroup(group_id, now_ms)
    return loaded
