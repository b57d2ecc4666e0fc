"""Committed offsets in memory: group -> (topic, partition) -> offset, metadata and timestamps.

The store changes only by applying `__consumer_offsets` records (a value or a tombstone), both
when the log is replayed at start-up and after a live commit became durable, so memory and log
always agree, record for record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from krust.group.records import OffsetCommitKey, OffsetCommitValue

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # Only OffsetCommit v2-v4 with an explicit retention time set this (Kafka's old semantics).
    expire_timestamp_ms: int = -1

    @classmethod
    def from_record(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
        )

    def to_record(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            offset=self.offset,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            leader_epoch=self.leader_epoch,
            expire_timestamp=self.expire_timestamp_ms,
        )


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

    def apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        if value is None:
            self.remove(key.group, (key.topic, key.partition))
        else:
            offsets = self._by_group.setdefault(key.group, {})
            offsets[(key.topic, key.partition)] = OffsetAndMetadata.from_record(value)

    def remove(self, group_id: str, partition: TopicPartition) -> None:
        offsets = self._by_group.get(group_id)
        if offsets is None:
            return
        offsets.pop(partition, None)
        if not offsets:
            del self._by_group[group_id]

    def get(self, group_id: str, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._by_group.get(group_id, {}).get(partition)

    def group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._by_group.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._by_group

    def group_ids(self) -> Iterator[str]:
        return iter(list(self._by_group))

    def take_group(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """Remove and return a group's offsets (moving a loaded partition in, or unloading it)."""
        return self._by_group.pop(group_id, {})

    def put_group(self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if offsets:
            self._by_group[group_id] = dict(offsets)
        else:
            self._by_group.pop(group_id, None)
