"""OffsetCommit, OffsetFetch, OffsetDelete, offset retention, and deleting whole groups.

A commit is validated against the group (generation, member, state), written to the group's
`__consumer_offsets` partition, and applied to memory only once the write is durable; the
response waits for that. Deleting and expiring write tombstones the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from krust.coordinator.clock import Clock
from krust.group.classic.group import ClassicGroup, GroupState
from krust.group.classic.group_manager import GroupManager
from krust.group.consumer.group import ConsumerGroup
from krust.group.consumer.member import ConsumerGroupMember
from krust.group.offsets import OffsetAndMetadata, OffsetStore, TopicPartition
from krust.group.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from krust.group.results import CoordinatorError, ErrorCode
from krust.group.settings import GroupCoordinatorConfig
from krust.group.transactional_offsets import TransactionalOffsets

log = logging.getLogger(__name__)

# KIP-848: members of consumer groups commit with their member epoch from OffsetCommit v9.
FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION = 9

Producer = tuple[int, int]
"""A transactional producer's id and epoch."""

AppendRecords = Callable[[str, list[CoordinatorRecord], Producer | None], Awaitable[None]]
"""Append records to the partition that owns the group, in the producer's transaction if one
is given; returns once they are durable."""

PartitionErrors = list[tuple[str, list[tuple[int, ErrorCode]]]]
"""Per topic (request order), per partition: the outcome."""


@dataclass(frozen=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    group_id: str
    producer_id: int
    producer_epoch: int
    # v3+ (KIP-447): the consumer's group generation, member and instance; -1/"" before.
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    # OffsetCommit v2-v4 only; -1 means "the broker's offsets.retention.minutes".
    retention_time_ms: int
    api_version: int
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]


class OffsetManager:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        clock: Clock,
        groups: GroupManager,
        append: AppendRecords,
        partition_exists: Callable[[str, int], bool],
        consumer_groups: Mapping[str, ConsumerGroup] | None = None,
    ) -> None:
        self.config = config
        self.store = OffsetStore()
        self._clock = clock
        self._groups = groups
        self._append = append
        self._partition_exists = partition_exists
        self._consumer_groups: Mapping[str, ConsumerGroup] = (
            consumer_groups if consumer_groups is not None else {}
        )
        # Commits written but not yet durable: retention must not tombstone them meanwhile.
        self._pending: Counter[tuple[str, str, int]] = Counter()
        self.transactional = TransactionalOffsets(self.apply)

    def apply(self, record: CoordinatorRecord) -> None:
        """Apply a durable offset record; an offset for an unknown group creates a simple group."""
        key, value = record
        if not isinstance(key, OffsetCommitKey):
            return
        assert value is None or isinstance(value, OffsetCommitValue)
        self.store.apply(key, value)
        if (
            value is not None
            and key.group not in self._groups.groups
            and key.group not in self._consumer_groups
        ):
            self._groups.groups[key.group] = ClassicGroup(key.group, self._clock.now_ms())

    # -- OffsetCommit --------------------------------------------------------------------------

    async def commit_offsets(self, request: OffsetCommitRequest) -> PartitionErrors:
        try:
            self._validate_commit(request)
        except CoordinatorError as refused:
            return _all_partitions(request, refused.error)

        group = self._groups.groups.get(request.group_id)
        if (
            group is not None
            and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE)
            and group.has_member(request.member_id)
        ):
            # A commit keeps the session alive, as in Kafka's classic protocol.
            self._groups.touch_member(group, request.member_id)

        return await self._commit(
            request.group_id, request.topics, request.retention_time_ms, producer=None
        )

    async def _commit(
        self,
        group_id: str,
        topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...],
        retention_time_ms: int,
        producer: Producer | None,
    ) -> PartitionErrors:
        """Write the offsets of the partitions that pass the checks; each partition's outcome."""
        now = self._clock.now_ms()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        results: PartitionErrors = []
        records: list[CoordinatorRecord] = []
        for topic, partitions in topics:
            outcomes: list[tuple[int, ErrorCode]] = []
            for commit in partitions:
                error = self._check_partition(topic, commit)
                if error is ErrorCode.none:
                    value = OffsetAndMetadata(
                        commit.offset, commit.leader_epoch, commit.metadata or "", now, expire
                    ).to_record()
                    records.append((OffsetCommitKey(group_id, topic, commit.partition), value))
                outcomes.append((commit.partition, error))
            results.append((topic, outcomes))

        if not records:
            return results
        if not await self._write(group_id, records, producer):
            return [
                (
                    topic,
                    [
                        (p, ErrorCode.coordinator_not_available if e is ErrorCode.none else e)
                        for p, e in outcomes
                    ],
                )
                for topic, outcomes in results
            ]
        return results

    # -- TxnOffsetCommit -----------------------------------------------------------------------

    async def commit_transactional_offsets(
        self, request: TxnOffsetCommitRequest
    ) -> PartitionErrors:
        """Offsets written in the producer's transaction, visible once it commits (Kafka's
        doTxnCommitOffsets checks: the group may be new; a named member must be known and a
        given generation must be the group's)."""
        group = self._groups.groups.get(request.group_id)
        consumer_group = self._consumer_groups.get(request.group_id)
        error = ErrorCode.none
        if consumer_group is not None:
            try:
                validate_consumer_commit(
                    consumer_group,
                    request.member_id,
                    request.generation_id,
                    None,
                )
            except CoordinatorError as refused:
                error = refused.error
        elif group is not None:
            if group.is_in(GroupState.DEAD):
                error = ErrorCode.coordinator_not_available
            else:
                try:
                    if request.group_instance_id is not None or request.member_id:
                        group.validate_member(request.member_id, request.group_instance_id)
                    if request.generation_id >= 0 and request.generation_id != group.generation_id:
                        error = ErrorCode.illegal_generation
                except CoordinatorError as refused:
                    error = refused.error
        elif request.member_id or request.generation_id >= 0:
            error = (
                ErrorCode.unknown_member_id if request.member_id else ErrorCode.illegal_generation
            )
        if error is not ErrorCode.none:
            return [
                (topic, [(c.partition, error) for c in commits])
                for topic, commits in request.topics
            ]
        producer = (request.producer_id, request.producer_epoch)
        return await self._commit(request.group_id, request.topics, -1, producer)

    def complete_transaction(
        self, producer_id: int, commit: bool, in_scope: Callable[[str], bool]
    ) -> int:
        """A transaction marker reached the partition of the groups `in_scope`."""
        return self.transactional.end(producer_id, commit, in_scope)

    def _validate_commit(self, request: OffsetCommitRequest) -> None:
        consumer_group = self._consumer_groups.get(request.group_id)
        if consumer_group is not None:
            validate_consumer_commit(
                consumer_group, request.member_id, request.generation_id, request.api_version
            )
            return
        group = self._groups.groups.get(request.group_id)
        if group is None:
            if request.generation_id < 0:
                return  # a simple (assign()-style) commit creates the group
            # Kafka answers ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9 on.
            raise CoordinatorError(
                ErrorCode.group_id_not_found
                if request.api_version >= 9
                else ErrorCode.illegal_generation
            )
        if group.is_in(GroupState.DEAD):
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        if request.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return
        if request.generation_id >= 0 or request.member_id or request.group_instance_id:
            group.validate_member(request.member_id, request.group_instance_id)
            if request.generation_id != group.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
        elif not group.is_in(GroupState.EMPTY):
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # Members know the new generation but not their assignment yet.
            raise CoordinatorError(ErrorCode.rebalance_in_progress)

    def _check_partition(self, topic: str, commit: PartitionCommit) -> ErrorCode:
        if not self._partition_exists(topic, commit.partition):
            return ErrorCode.unknown_topic_or_partition
        if commit.metadata is not None and (
            len(commit.metadata.encode("utf-16-le")) // 2 > self.config.offset_metadata_max_bytes
        ):
            # Kafka compares the Java string length (UTF-16 units) to offset.metadata.max.bytes.
            return ErrorCode.offset_metadata_too_large
        return ErrorCode.none

    async def _write(
        self, group_id: str, records: list[CoordinatorRecord], producer: Producer | None = None
    ) -> bool:
        """Append and, once durable, apply (or, in a transaction, hold until its marker);
        False if the append failed."""
        keys = [
            (k.group, k.topic, k.partition) for k, _ in records if isinstance(k, OffsetCommitKey)
        ]
        self._pending.update(keys)
        try:
            await self._append(group_id, records, producer)
        except Exception:
            log.exception("group %s: writing %d offset records failed", group_id, len(records))
            return False
        else:
            for record in records:
                if producer is None:
                    self.apply(record)
                else:
                    self.transactional.apply_pending(producer[0], record)
            return True
        finally:
            self._pending.subtract(keys)
            self._pending = +self._pending

    # -- OffsetFetch ---------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets of the requested partitions (None: not committed), or all of them."""
        group = self._groups.groups.get(group_id)
        known = (group is not None and not group.is_in(GroupState.DEAD)) or (
            group_id in self._consumer_groups
        )
        offsets = self.store.group_offsets(group_id) if known else {}
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
            for (topic, partition), committed in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, committed))
            return list(by_topic.items())
        return [
            (topic, [(p, offsets.get((topic, p))) for p in partitions])
            for topic, partitions in topics
        ]

    # -- OffsetDelete --------------------------------------------------------------------------

    async def delete_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[ErrorCode, PartitionErrors]:
        group = self._groups.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, []
        if not group.is_in(GroupState.EMPTY) and not group.uses_consumer_protocol():
            return ErrorCode.non_empty_group, []
        results: PartitionErrors = []
        records: list[CoordinatorRecord] = []
        for topic, partitions in topics:
            # KIP-496: a live consumer group keeps the offsets of the topics it consumes.
            if group.is_subscribed_to_topic(topic):
                results.append(
                    (topic, [(p, ErrorCode.group_subscribed_to_topic) for p in partitions])
                )
                continue
            for partition in partitions:
                if self.store.get(group_id, (topic, partition)) is not None:
                    records.append((OffsetCommitKey(group_id, topic, partition), None))
            results.append((topic, [(p, ErrorCode.none) for p in partitions]))
        if records and not await self._write(group_id, records):
            return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, results

    # -- group deletion and retention ----------------------------------------------------------

    def offset_tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        return [
            (OffsetCommitKey(group_id, topic, partition), None)
            for topic, partition in self.store.group_offsets(group_id)
        ]

    async def delete_group(self, group: ClassicGroup) -> ErrorCode:
        """Tombstone the group and all its offsets. The caller checked that it is Empty."""
        group_id = group.group_id
        self._groups.mark_dead(group)
        records: list[CoordinatorRecord] = [
            (OffsetCommitKey(group_id, topic, partition), None)
            for topic, partition in self.store.group_offsets(group_id)
        ]
        records.append((GroupMetadataKey(group_id), None))
        written = await self._write(group_id, records)
        if self._groups.groups.get(group_id) is group:
            self._groups.unload([group_id], ErrorCode.coordinator_not_available)
        self.store.take_group(group_id)
        return ErrorCode.none if written else ErrorCode.coordinator_not_available

    async def expire_offsets(self, is_owned: Callable[[str], bool]) -> int:
        """Tombstone offsets past offsets.retention.minutes; delete Empty groups left without any.

        Returns how many offsets expired. `is_owned` tells whether a group's partition is loaded
        here (groups of partitions still loading are left alone).
        """
        now = self._clock.now_ms()
        writes: list[Awaitable[object]] = []
        expired_count = 0
        for group_id, group in list(self._groups.groups.items()):
            if not is_owned(group_id) or group.is_in(GroupState.DEAD):
                continue
            offsets = self.store.group_offsets(group_id)
            expired = [
                tp
                for tp, committed in offsets.items()
                if self._is_expired(group, tp, committed, now)
            ]
            expired_count += len(expired)
            pending = any(key[0] == group_id for key in self._pending)
            if (
                group.is_in(GroupState.EMPTY)
                and len(expired) == len(offsets)
                and not group.pending_join_members
                and not pending
            ):
                writes.append(self.delete_group(group))
            elif expired:
                writes.append(
                    self._write(
                        group_id,
                        [
                            (OffsetCommitKey(group_id, topic, partition), None)
                            for topic, partition in expired
                        ],
                    )
                )
        await asyncio.gather(*writes)
        return expired_count

    def expired_consumer_offsets(self, group: ConsumerGroup) -> tuple[list[TopicPartition], bool]:
        """A consumer group's offsets past retention, and whether none would be left. Kafka
        counts retention from each commit for these groups; offsets of a topic a member
        subscribes to, or with a commit being written, never expire."""
        now = self._clock.now_ms()
        offsets = self.store.group_offsets(group.group_id)
        expired = [
            tp
            for tp, committed in offsets.items()
            if not self._pending[(group.group_id, *tp)]
            and not group.is_subscribed_to_topic(tp[0])
            and _past_retention(committed, committed.commit_timestamp_ms, now, self.config)
        ]
        pending = any(key[0] == group.group_id for key in self._pending)
        return expired, len(expired) == len(offsets) and not pending

    async def write_tombstones(self, group_id: str, partitions: list[TopicPartition]) -> bool:
        return await self._write(
            group_id,
            [
                (OffsetCommitKey(group_id, topic, partition), None)
                for topic, partition in partitions
            ],
        )

    def _is_expired(
        self,
        group: ClassicGroup,
        partition: TopicPartition,
        committed: OffsetAndMetadata,
        now_ms: int,
    ) -> bool:
        if self._pending[(group.group_id, *partition)] or group.is_subscribed_to_topic(
            partition[0]
        ):
            return False
        if group.protocol_type is None:
            base = committed.commit_timestamp_ms
        elif group.is_in(GroupState.EMPTY):
            # Retention counts from when the group became Empty, not from the last commit.
            base = (
                committed.commit_timestamp_ms
                if group.state_timestamp_ms is None
                else group.state_timestamp_ms
            )
        elif group.is_in(GroupState.STABLE) and group.subscribed_topics is not None:
            base = committed.commit_timestamp_ms
        else:
            return False
        return _past_retention(committed, base, now_ms, self.config)


def _past_retention(
    committed: OffsetAndMetadata, base_ms: int, now_ms: int, config: GroupCoordinatorConfig
) -> bool:
    """An explicit expiry time (OffsetCommit v2-v4) wins; else retention counts from `base_ms`."""
    if committed.expire_timestamp_ms >= 0:
        return now_ms >= committed.expire_timestamp_ms
    return now_ms - base_ms >= config.offsets_retention_ms


def _all_partitions(request: OffsetCommitRequest, error: ErrorCode) -> PartitionErrors:
    return [
        (topic, [(c.partition, error) for c in partitions]) for topic, partitions in request.topics
    ]


def validate_consumer_commit(
    group: ConsumerGroup,
    member_id: str,
    member_epoch: int,
    api_version: int | None,
) -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit: a member commits at its current epoch (a
    classic member names it as its generation). `api_version`: OffsetCommit's; None for a
    TxnOffsetCommit."""
    if member_epoch < 0 and group.is_empty():
        return  # the admin client, or a consumer using assign()
    member = group.member(member_id)
    if (
        api_version is not None
        and not member.uses_classic_protocol
        and api_version < FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION
    ):
        raise CoordinatorError(
            ErrorCode.unsupported_version,
            "OffsetCommit version 9 or above must be used by members using the modern group "
            "protocol",
        )
    _check_member_epoch(member, member_epoch)


def validate_consumer_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
    """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ names the member)."""
    if member_id is None and member_epoch < 0:
        return
    _check_member_epoch(group.member(member_id or ""), member_epoch)


def _check_member_epoch(member: ConsumerGroupMember, member_epoch: int) -> None:
    if member_epoch == member.member_epoch:
        return
    if member.uses_classic_protocol:
        raise CoordinatorError(
            ErrorCode.illegal_generation,
            f"The received generation id {member_epoch} does not match the expected member "
            f"epoch {member.member_epoch}.",
        )
    raise CoordinatorError(
        ErrorCode.stale_member_epoch,
        f"The received member epoch {member_epoch} does not match the expected member "
        f"epoch {member.member_epoch}.",
    )
