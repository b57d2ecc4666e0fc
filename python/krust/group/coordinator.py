"""The group coordinator: which groups this broker owns, their loading, and every group operation.

A group belongs to one `__consumer_offsets` partition (krust.coordinator.partitioner); the
leader of that partition is its coordinator. This broker serves a group only once that partition
has been replayed from the log (krust.coordinator.partitions); until then it answers
COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR when another broker leads the partition. The
per-API logic lives in GroupManager (membership) and OffsetManager (offsets); this class routes,
loads and runs the periodic offset expiry.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Coroutine
from typing import Any

from krust.coordinator.clock import Cancellable, Clock
from krust.coordinator.log import CoordinatorLog, CoreLog
from krust.coordinator.partitioner import partition_for
from krust.coordinator.partitions import CoordinatorPartitions, Install, PartitionState
from krust.coordinator.topic_creation import TopicCreation
from krust.group.classic.group import GroupState
from krust.group.classic.group_manager import (
    GroupManager,
    JoinGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from krust.group.cluster import ControllerView, TopicView
from krust.group.consumer.classic_members import ClassicMembers
from krust.group.consumer.group import ConsumerGroup, group_tombstones
from krust.group.consumer.heartbeat import ConsumerGroupHeartbeats
from krust.group.consumer.heartbeat_request import HeartbeatRequest, HeartbeatResult, validate
from krust.group.loader import load_partition
from krust.group.migration import GroupMigration
from krust.group.offset_manager import (
    OffsetCommitRequest,
    OffsetManager,
    PartitionErrors,
    Producer,
    TxnOffsetCommitRequest,
    validate_consumer_fetch,
)
from krust.group.offsets import OffsetAndMetadata
from krust.group.records import (
    OFFSETS_TOPIC,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordCodec,
)
from krust.group.results import (
    CoordinatorError,
    CoordinatorLocation,
    DescribedGroup,
    DescribedMember,
    ErrorCode,
    JoinGroupResult,
    ListedGroup,
    SyncGroupResult,
)
from krust.group.settings import GroupCoordinatorConfig

log = logging.getLogger(__name__)

GROUP_VERSION_FEATURE = "group.version"

FetchedOffsets = list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]


class GroupCoordinator:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        core: CoreLog,
        controller: ControllerView,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self._controller = controller
        self._clock = clock
        self._loop = loop
        self.log: CoordinatorLog[CoordinatorRecord] = CoordinatorLog(
            core, loop, OFFSETS_TOPIC, GroupRecordCodec()
        )
        self.groups = GroupManager(config, clock, loop, self._store_group)
        self.consumer = ConsumerGroupHeartbeats(
            config,
            clock,
            lambda: controller.image,
            self._write_consumer_records,
        )
        self.classic_members = ClassicMembers(self.consumer, lambda: controller.image)
        self.migration = GroupMigration(
            config, self.groups, self.consumer, lambda: controller.image, clock
        )
        self.consumer.downgrade = self.migration.downgrade
        self.offsets = OffsetManager(
            config, clock, self.groups, self._append, self._has_partition, self.consumer.groups
        )
        self._partitions = CoordinatorPartitions(loop, OFFSETS_TOPIC, self._load, self._unload)
        self._background: set[asyncio.Task[Any]] = set()
        self._topic_creation = TopicCreation(
            loop,
            OFFSETS_TOPIC,
            lambda: controller.ensure_topic(
                OFFSETS_TOPIC,
                config.offsets_topic_num_partitions,
                config.offsets_topic_replication_factor,
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(config.offsets_topic_segment_bytes),
                },
                internal=True,
            ),
        )
        self._expiry_timer: Cancellable | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Load the partitions this broker leads, follow leadership changes of
        `__consumer_offsets` (load when this broker becomes a partition's leader, unload when
        another does) and start the periodic offset expiry."""
        self.sync_partitions()
        self._controller.on_metadata_change(self.sync_partitions)
        self._controller.on_metadata_change(self.consumer.on_metadata_change)
        self._schedule_expiry()

    async def close(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._partitions.close()
        for task in self._background:
            task.cancel()
        self.groups.close()
        self.consumer.close()
        await self.log.idle()

    async def idle(self) -> None:
        """Wait until background work (expiry runs, loads) and queued writes are done."""
        while self._background or self._partitions.loads():
            await asyncio.gather(
                *self._background, *self._partitions.loads(), return_exceptions=True
            )
        await self.log.idle()

    async def wait_loaded(self) -> None:
        """Wait for the partition loads under way (start-up, tests)."""
        await self._partitions.wait_loaded()

    def sync_partitions(self) -> None:
        """Load newly led partitions, unload the ones another broker now leads."""
        topic = self._offsets_topic()
        if topic is None:
            return
        leaders = {partition: image.leader for partition, image in topic.partitions.items()}
        self._partitions.sync(leaders, self._controller.image.node_id)

    async def _load(self, partition: int) -> Install:
        loaded = await load_partition(
            self.log, partition, self.config.offsets_load_buffer_size, self._clock.now_ms()
        )

        def install() -> None:
            for group_id in loaded.offsets.group_ids():
                self.offsets.store.put_group(group_id, loaded.offsets.group_offsets(group_id))
            self.offsets.transactional.merge(loaded.transactional)
            self.groups.on_groups_loaded(list(loaded.groups.values()))
            self.consumer.install(list(loaded.consumer_groups.values()))
            log.log(
                logging.INFO if loaded.stats.records else logging.DEBUG,
                "__consumer_offsets-%d: loaded %d groups from %d records",
                partition,
                len(loaded.groups),
                loaded.stats.records,
            )

        return install

    def _unload(self, partition: int) -> None:
        group_ids = [g for g in self.groups.groups if self.partition_for(g) == partition]
        self.groups.unload(group_ids, ErrorCode.not_coordinator)
        self.consumer.forget(
            [g for g in self.consumer.groups if self.partition_for(g) == partition]
        )
        for group_id in self.offsets.store.group_ids():
            if self.partition_for(group_id) == partition:
                self.offsets.store.take_group(group_id)
        self.offsets.transactional.drop_groups(lambda g: self.partition_for(g) == partition)

    def _schedule_expiry(self) -> None:
        def fire() -> None:
            self._spawn(self.offsets.expire_offsets(self._is_owned))
            self._spawn(self._expire_consumer_groups())
            self._schedule_expiry()

        interval = self.config.offsets_retention_check_interval_ms
        self._expiry_timer = self._clock.call_later(interval, fire)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = self._loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- ownership -----------------------------------------------------------------------------

    def _offsets_topic(self) -> TopicView | None:
        return self._controller.image.topics.get(OFFSETS_TOPIC)

    def partition_for(self, group_id: str) -> int:
        topic = self._offsets_topic()
        # The existing topic's partition count wins over the setting, as in Kafka.
        count = len(topic.partitions) if topic else self.config.offsets_topic_num_partitions
        return partition_for(group_id, count)

    def _is_owned(self, group_id: str) -> bool:
        return self._partitions.is_active(self.partition_for(group_id))

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker serves the group now, else why not (all retriable)."""
        topic = self._offsets_topic()
        if topic is None:
            return ErrorCode.coordinator_not_available
        partition = self.partition_for(group_id)
        image = topic.partitions.get(partition)
        if image is None or image.leader != self._controller.image.node_id:
            if self._partitions.is_known(partition):
                self._partitions.unload(partition)
            return ErrorCode.not_coordinator
        state = self._partitions.state(partition)
        if state is PartitionState.ACTIVE:
            return ErrorCode.none
        if state is None:
            self._partitions.start_loading(partition)
        return ErrorCode.coordinator_load_in_progress

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id now, from the controller's image."""
        topic = self._controller.image.topics_by_id.get(topic_id)
        return topic.name if topic is not None else None

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self._controller.image.topics.get(name)
        return topic.topic_id if topic is not None else None

    def _has_partition(self, topic: str, partition: int) -> bool:
        image = self._controller.image.topics.get(topic)
        return image is not None and partition in image.partitions

    # -- FindCoordinator -----------------------------------------------------------------------

    async def find_coordinator(self, key: str, listener: str = "") -> CoordinatorLocation:
        """Where the coordinator of `key` is, at its address on `listener` (the requester's)."""
        if self._offsets_topic() is None and not await self._create_offsets_topic():
            return CoordinatorLocation(ErrorCode.coordinator_not_available)
        topic = self._offsets_topic()
        if topic is None:
            return CoordinatorLocation(ErrorCode.coordinator_not_available)
        image = self._controller.image
        partition = topic.partitions.get(self.partition_for(key))
        broker = image.brokers.get(partition.leader) if partition is not None else None
        if partition is None or broker is None:
            return CoordinatorLocation(ErrorCode.coordinator_not_available)
        if partition.leader == image.node_id:
            self.coordinator_error(key)  # start loading now, so the group is ready sooner
        host, port = broker.address_for(listener)
        return CoordinatorLocation(ErrorCode.none, broker.node_id, host, port)

    async def _create_offsets_topic(self) -> bool:
        if not await self._topic_creation.run():
            return False
        self.sync_partitions()
        return True

    # -- membership ----------------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResult:
        error = self._group_error(request.group_id)
        if error is ErrorCode.none and not (
            self.config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            error = ErrorCode.invalid_session_timeout
        if error is not ErrorCode.none:
            return JoinGroupResult(error, member_id=request.member_id)
        consumer_group = self.consumer.groups.get(request.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty():
                return await self.classic_members.join(consumer_group, request)
            # An empty consumer group gives way to a classic group (Kafka's
            # maybeDeleteEmptyConsumerGroup); its committed offsets stay.
            if not await self._drop_consumer_group(consumer_group, []):
                return JoinGroupResult(ErrorCode.coordinator_not_available, request.member_id)
        return await self.groups.join_group(request)

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResult:
        error = self._group_error(request.group_id)
        if error is not ErrorCode.none:
            return SyncGroupResult(error)
        consumer_group = self.consumer.groups.get(request.group_id)
        if consumer_group is not None:
            if consumer_group.is_empty():
                return SyncGroupResult(ErrorCode.unknown_member_id)
            return self.classic_members.sync(consumer_group, request)
        return await self.groups.sync_group(request)

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(
                consumer_group, member_id, group_instance_id, generation_id
            )
        return self.groups.heartbeat(group_id, member_id, group_instance_id, generation_id)

    async def leave(
        self, group_id: str, members: list[LeavingMember]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        """LeaveGroup from classic members, of a classic or a consumer group."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is None or self._group_error(group_id) is not ErrorCode.none:
            return self.leave_group(group_id, members)
        return await self.classic_members.leave(consumer_group, members)

    def leave_group(
        self, group_id: str, members: list[LeavingMember]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        """LeaveGroup of a classic group (`leave` also serves consumer groups)."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, []
        return self.groups.leave_group(group_id, members)

    def _group_error(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        return self.coordinator_error(group_id)

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    async def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        try:
            validate(request, self.consumer.assignors)
        except CoordinatorError as refused:
            return HeartbeatResult(refused.error, refused.message)
        if self._controller.image.features.get(GROUP_VERSION_FEATURE, 0) < 1:
            return HeartbeatResult(
                ErrorCode.unsupported_version,
                "The new consumer group protocol (KIP-848) needs group.version 1 or above; "
                "upgrade it with kafka-features, or use group.protocol=classic.",
            )
        error = self.coordinator_error(request.group_id)
        if error is not ErrorCode.none:
            return HeartbeatResult(error)
        group = self.consumer.groups.get(request.group_id)
        records: list[CoordinatorRecord] = []
        if group is None:
            try:
                group = self._new_consumer_group(
                    request.group_id, request.member_epoch == 0, records
                )
            except CoordinatorError as refused:
                return HeartbeatResult(refused.error, refused.message)
        result = await self.consumer.heartbeat(request, group, records)
        if group.is_empty() and group.group_epoch == 0:
            # Nothing was written for it: a refused first heartbeat leaves no group behind.
            self.consumer.groups.pop(request.group_id, None)
        return result

    def _new_consumer_group(
        self, group_id: str, create: bool, records: list[CoordinatorRecord]
    ) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup: an empty classic group is replaced, a
        non-empty one is upgraded when the policy allows (the conversion's `records` are
        written with the heartbeat's)."""
        classic = self.groups.groups.get(group_id)
        if classic is not None and not classic.is_in(GroupState.DEAD) and classic.members:
            if not (create and self.migration.may_upgrade(classic)):
                raise CoordinatorError(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
                )
            return self.migration.upgrade(classic, records)
        if not create:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if classic is not None:
            # Its committed offsets stay: they are the new group's.
            self.groups.unload([group_id], ErrorCode.not_coordinator)
            if classic.protocol_type is not None:
                self._store_group(group_id, None)
        group = ConsumerGroup(group_id)
        self.consumer.groups[group_id] = group
        return group

    async def _write_consumer_records(
        self, group_id: str, records: list[CoordinatorRecord]
    ) -> bool:
        """Append a consumer group's records, already applied in memory. If the append fails
        memory is ahead of the log: the partition is reloaded from the log, as Kafka reverts to
        its last committed state."""
        partition = self.partition_for(group_id)
        try:
            await self.log.append(partition, records)
        except Exception:
            log.exception("group %s: writing %d records failed; reloading", group_id, len(records))
            if self._partitions.is_known(partition):
                self._partitions.unload(partition)
            return False
        return True

    def consumer_group(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe's view: the group, or why there is none to describe."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, None, None
        group = self.consumer.groups.get(group_id)
        if group is None:
            classic = self.groups.groups.get(group_id)
            if classic is not None and not classic.is_in(GroupState.DEAD):
                return (
                    ErrorCode.group_id_not_found,
                    f"Group {group_id} is not a consumer group.",
                    None,
                )
            return ErrorCode.group_id_not_found, f"Group {group_id} not found.", None
        return ErrorCode.none, None, group

    def topic_names_by_id(self) -> dict[uuid.UUID, str]:
        return {
            topic_id: topic.name for topic_id, topic in self._controller.image.topics_by_id.items()
        }

    # -- offsets -------------------------------------------------------------------------------

    async def commit_offsets(self, request: OffsetCommitRequest) -> PartitionErrors:
        error = self.coordinator_error(request.group_id)
        if error is not ErrorCode.none:
            return [
                (topic, [(commit.partition, error) for commit in commits])
                for topic, commits in request.topics
            ]
        return await self.offsets.commit_offsets(request)

    async def commit_transactional_offsets(
        self, request: TxnOffsetCommitRequest
    ) -> PartitionErrors:
        error = self.coordinator_error(request.group_id)
        if error is not ErrorCode.none:
            return [
                (topic, [(commit.partition, error) for commit in commits])
                for topic, commits in request.topics
            ]
        return await self.offsets.commit_transactional_offsets(request)

    def complete_transaction(self, producer_id: int, commit: bool, partition: int) -> None:
        """A transaction marker was written to `__consumer_offsets-<partition>`: the producer's
        pending offsets of that partition's groups become committed, or are dropped."""
        self.offsets.complete_transaction(
            producer_id, commit, lambda group_id: self.partition_for(group_id) == partition
        )

    def is_unstable(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of this group and partition."""
        return self.offsets.transactional.is_pending(group_id, topic, partition)

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        member: tuple[str | None, int] = (None, -1),
    ) -> tuple[ErrorCode, FetchedOffsets]:
        """`member`: the member id and epoch an OffsetFetch v9+ names (a consumer group checks
        them)."""
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.none:
            return error, []
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            try:
                validate_consumer_fetch(consumer_group, *member)
            except CoordinatorError as refused:
                return refused.error, []
        return ErrorCode.none, self.offsets.fetch_offsets(group_id, topics)

    async def delete_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[ErrorCode, PartitionErrors]:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, []
        return await self.offsets.delete_offsets(group_id, topics)

    # -- administration ------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> DescribedGroup:
        error = self.coordinator_error(group_id)
        if error is not ErrorCode.none:
            return DescribedGroup(group_id, error)
        if group_id in self.consumer.groups:
            # DescribeGroups describes classic groups only (ConsumerGroupDescribe the others).
            return DescribedGroup(group_id, ErrorCode.none, GroupState.DEAD.value, is_classic=False)
        group = self.groups.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DescribedGroup(group_id, ErrorCode.none, GroupState.DEAD.value)
        # Kafka shows member metadata and assignments only for a Stable group.
        stable = group.is_in(GroupState.STABLE)
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return DescribedGroup(
            group_id,
            ErrorCode.none,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(
        self, states_filter: list[str], types_filter: list[str]
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """Groups of the loaded partitions; LOAD_IN_PROGRESS (with those) while others load."""
        states = {state.strip().lower() for state in states_filter}
        types = {group_type.strip().lower() for group_type in types_filter}
        listed = [
            ListedGroup(group.group_id, group.protocol_type or "", group.state.value)
            for group in self.groups.groups.values()
            if self._is_owned(group.group_id)
            and not group.is_in(GroupState.DEAD)
            and (not states or group.state.value.lower() in states)
            and (not types or "classic" in types)
        ]
        listed.extend(
            ListedGroup(group.group_id, "consumer", group.state.value, "consumer")
            for group in self.consumer.groups.values()
            if self._is_owned(group.group_id)
            and not group.deleted
            and (not states or group.state.value.lower() in states)
            and (not types or "consumer" in types)
        )
        loading = self._partitions.any_loading()
        return (ErrorCode.coordinator_load_in_progress if loading else ErrorCode.none), listed

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, ErrorCode]]:
        results = await asyncio.gather(*(self._delete_group(group_id) for group_id in group_ids))
        return list(zip(group_ids, results, strict=True))

    async def _delete_group(self, group_id: str) -> ErrorCode:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty():
                return ErrorCode.non_empty_group
            return await self._delete_consumer_group(consumer_group)
        group = self.groups.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if not group.is_in(GroupState.EMPTY):
            return ErrorCode.non_empty_group
        return await self.offsets.delete_group(group)

    async def _expire_consumer_groups(self) -> None:
        """Retention for consumer groups: offsets expire offsets.retention.minutes after their
        commit unless a member subscribes to their topic; an empty group left without offsets
        is deleted (Kafka's cleanupGroupMetadata)."""
        writes: list[Awaitable[object]] = []
        for group in list(self.consumer.groups.values()):
            if not self._is_owned(group.group_id):
                continue
            expired, none_left = self.offsets.expired_consumer_offsets(group)
            if group.is_empty() and none_left:
                writes.append(self._delete_consumer_group(group))
            elif expired:
                writes.append(self.offsets.write_tombstones(group.group_id, expired))
        await asyncio.gather(*writes)

    async def _delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """Tombstones for its offsets and its records; the group is gone at once."""
        offsets = self.offsets.offset_tombstones(group.group_id)
        written = await self._drop_consumer_group(group, offsets)
        self.offsets.store.take_group(group.group_id)
        return ErrorCode.none if written else ErrorCode.coordinator_not_available

    async def _drop_consumer_group(
        self, group: ConsumerGroup, records: list[CoordinatorRecord]
    ) -> bool:
        """Forget the group and write `records` then its tombstones; False if that failed."""
        for record in group_tombstones(group):
            group.apply(record)
            records.append(record)
        self.consumer.forget([group.group_id])
        return await self._write_consumer_records(group.group_id, records)

    # -- writing -------------------------------------------------------------------------------

    def _append(
        self, group_id: str, records: list[CoordinatorRecord], producer: Producer | None
    ) -> Awaitable[None]:
        return self.log.append(self.partition_for(group_id), records, producer)

    def _store_group(self, group_id: str, value: GroupMetadataValue | None) -> asyncio.Future[None]:
        return self.log.append(self.partition_for(group_id), [(GroupMetadataKey(group_id), value)])
