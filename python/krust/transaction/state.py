"""Which transactional ids this broker coordinates, their loading and their durable changes
(Kafka's TransactionStateManager).

A transactional id belongs to one partition of `__transaction_state`; the leader of that
partition is its coordinator. A partition is served once it has been replayed; its coordinator
epoch is the partition's leader epoch at load time, and every marker and log write carries it, so
that work started under an older leadership is dropped. A state change is answered only after
its record is durable, and only if the partition was not reloaded meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from krust.coordinator.clock import Clock
from krust.coordinator.loader import replay
from krust.coordinator.log import CoordinatorLog, CoreLog
from krust.coordinator.partitioner import partition_for
from krust.coordinator.partitions import CoordinatorPartitions, Install, PartitionState
from krust.coordinator.topic_creation import TopicCreation
from krust.transaction.metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    from_transit,
)
from krust.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    TransactionRecord,
    TransactionRecordCodec,
    value_version,
)
from krust.transaction.settings import LOAD_BUFFER_BYTES, TransactionCoordinatorConfig

log = logging.getLogger(__name__)

TRANSACTION_VERSION_FEATURE = "transaction.version"


class PartitionView(Protocol):
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...


class TopicView(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partitions(self) -> Mapping[int, PartitionView]: ...


class BrokerView(Protocol):
    @property
    def node_id(self) -> int: ...
    def address_for(self, listener: str) -> tuple[str, int]: ...


class ImageView(Protocol):
    @property
    def node_id(self) -> int: ...
    @property
    def brokers(self) -> Mapping[int, BrokerView]: ...
    @property
    def topics(self) -> Mapping[str, TopicView]: ...
    @property
    def features(self) -> Mapping[str, int]: ...


class ControllerView(Protocol):
    """What the transaction coordinator reads from krust.controller (docs/python-services.md)."""

    @property
    def image(self) -> ImageView: ...

    def on_metadata_change(self, callback: Callable[[], None]) -> None: ...

    async def ensure_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        internal: bool = False,
    ) -> Any: ...


@dataclass
class PartitionCache:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """A transactional id's metadata and the coordinator epoch it is served under."""

    coordinator_epoch: int
    metadata: TransactionMetadata


Lookup = tuple[ErrorCode, Entry | None]
OnLoaded = Callable[[int, list[TransactionMetadata]], None]
"""Called with a loaded partition's coordinator epoch and its PrepareCommit/PrepareAbort ids."""


class TransactionStateManager:
    def __init__(
        self,
        config: TransactionCoordinatorConfig,
        core: CoreLog,
        controller: ControllerView,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self._controller = controller
        self._clock = clock
        self._loop = loop
        self._codec = TransactionRecordCodec()
        self.log: CoordinatorLog[TransactionRecord] = CoordinatorLog(
            core, loop, TRANSACTION_STATE_TOPIC, self._codec
        )
        self._partitions = CoordinatorPartitions(
            loop, TRANSACTION_STATE_TOPIC, self._load, self._unload
        )
        self._cache: dict[int, PartitionCache] = {}
        self._loading_epochs: dict[int, int] = {}
        self.on_loaded: OnLoaded = lambda _epoch, _pending: None
        self.on_unloaded: Callable[[int], None] = lambda _partition: None
        self._topic_creation = TopicCreation(
            loop,
            TRANSACTION_STATE_TOPIC,
            lambda: controller.ensure_topic(
                TRANSACTION_STATE_TOPIC,
                config.transaction_state_log_num_partitions,
                config.transaction_state_log_replication_factor,
                config.topic_configs(),
                internal=True,
            ),
        )

    # -- ownership -----------------------------------------------------------------------------

    def topic(self) -> TopicView | None:
        return self._controller.image.topics.get(TRANSACTION_STATE_TOPIC)

    def partition_count(self) -> int:
        topic = self.topic()
        # The existing topic's partition count wins over the setting, as in Kafka.
        return len(topic.partitions) if topic else self.config.transaction_state_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def transaction_version(self) -> int:
        """The finalized `transaction.version` (the server's; 0 when not finalized)."""
        return int(self._controller.image.features.get(TRANSACTION_VERSION_FEATURE, 0))

    def sync_partitions(self) -> None:
        """Load newly led partitions, unload those another broker leads, reload a partition
        whose leader epoch changed while this broker kept leading it (a new coordinator epoch)."""
        topic = self.topic()
        if topic is None:
            return
        node_id = self._controller.image.node_id
        for partition, image in topic.partitions.items():
            cache = self._cache.get(partition)
            epoch = cache.coordinator_epoch if cache else self._loading_epochs.get(partition)
            if image.leader == node_id and epoch is not None and epoch != image.leader_epoch:
                self._partitions.unload(partition)
        leaders = {partition: image.leader for partition, image in topic.partitions.items()}
        self._partitions.sync(leaders, node_id)

    def lookup(self, transactional_id: str) -> Lookup:
        """(NONE, entry or None) when this broker serves the id now, else why not."""
        partition = self.partition_for(transactional_id)
        topic = self.topic()
        image = topic.partitions.get(partition) if topic is not None else None
        if image is None or image.leader != self._controller.image.node_id:
            if self._partitions.is_known(partition):
                self._partitions.unload(partition)
            return ErrorCode.not_coordinator, None
        state = self._partitions.state(partition)
        if state is None:
            self._partitions.start_loading(partition)
        if state is not PartitionState.ACTIVE:
            return ErrorCode.coordinator_load_in_progress, None
        cache = self._cache[partition]
        metadata = cache.transactions.get(transactional_id)
        return ErrorCode.none, None if metadata is None else Entry(
            cache.coordinator_epoch, metadata
        )

    def leader_of(self, partition: TopicPartition) -> int | None:
        """The leader of a data partition: None if it no longer exists, -1 if it has no leader
        (or one this broker does not know)."""
        image = self._controller.image
        topic = image.topics.get(partition.topic)
        view = topic.partitions.get(partition.partition) if topic is not None else None
        if view is None:
            return None
        return view.leader if view.leader >= 0 and view.leader in image.brokers else -1

    def put_if_absent(self, metadata: TransactionMetadata) -> Entry:
        """Add a new id to its (active) partition, or return the one already there."""
        cache = self._cache[self.partition_for(metadata.transactional_id)]
        existing = cache.transactions.setdefault(metadata.transactional_id, metadata)
        return Entry(cache.coordinator_epoch, existing)

    def any_loading(self) -> bool:
        return self._partitions.any_loading()

    def loaded(self) -> list[tuple[int, PartitionCache]]:
        return list(self._cache.items())

    # -- loading -------------------------------------------------------------------------------

    async def _load(self, partition: int) -> Install:
        topic = self.topic()
        image = topic.partitions.get(partition) if topic is not None else None
        # The coordinator epoch is the leader epoch of the partition this broker now leads.
        epoch = image.leader_epoch if image is not None else 0
        self._loading_epochs[partition] = epoch
        loaded: dict[str, TransactionMetadata] = {}

        def apply(record: TransactionRecord) -> None:
            transactional_id, transit = record
            if transit is None:
                loaded.pop(transactional_id, None)
            else:
                loaded[transactional_id] = from_transit(transactional_id, transit)

        try:
            stats = await replay(self.log, partition, LOAD_BUFFER_BYTES, apply)
        finally:
            if self._loading_epochs.get(partition) == epoch:
                del self._loading_epochs[partition]

        def install() -> None:
            self._cache[partition] = PartitionCache(epoch, loaded)
            log.log(
                logging.INFO if stats.records else logging.DEBUG,
                "%s-%d: loaded %d transactional ids from %d records at coordinator epoch %d",
                TRANSACTION_STATE_TOPIC,
                partition,
                len(loaded),
                stats.records,
                epoch,
            )
            pending = [
                metadata
                for metadata in loaded.values()
                if metadata.state
                in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
            ]
            if pending:
                # After the install, when the partition is ACTIVE and lookups succeed.
                self._loop.call_soon(self.on_loaded, epoch, pending)

        return install

    def _unload(self, partition: int) -> None:
        self._cache.pop(partition, None)
        self.on_unloaded(partition)

    def close(self) -> None:
        self._partitions.close()

    async def wait_loaded(self) -> None:
        await self._partitions.wait_loaded()

    def loads(self) -> list[asyncio.Task[None]]:
        return self._partitions.loads()

    # -- the topic -----------------------------------------------------------------------------

    async def ensure_topic(self) -> bool:
        """Create `__transaction_state` on first use, as Kafka does; False if that failed."""
        if self.topic() is not None:
            return True
        if not await self._topic_creation.run():
            return False
        self.sync_partitions()
        return self.topic() is not None

    # -- writing -------------------------------------------------------------------------------

    async def append_transition(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransit,
        keep_pending_on: frozenset[ErrorCode] = frozenset(),
    ) -> ErrorCode:
        """Write `transit`, then apply it if this broker still serves the id at that epoch.

        On a failed write the pending transition is dropped, unless the error is in
        `keep_pending_on` (the caller retries the same write)."""
        error, entry = self.lookup(transactional_id)
        if error is not ErrorCode.none:
            return error
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        self._codec.value_version = value_version(self.transaction_version())
        try:
            await self.log.append(
                self.partition_for(transactional_id), [(transactional_id, transit)]
            )
        except Exception as failure:
            log.warning("%s: writing %s failed: %s", transactional_id, transit.state, failure)
            error = ErrorCode.coordinator_not_available
        after_error, after = self.lookup(transactional_id)
        if after_error is not ErrorCode.none:
            return after_error
        if after is None or after.coordinator_epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        if error is ErrorCode.none:
            after.metadata.complete_transition(transit)
        elif error not in keep_pending_on:
            after.metadata.pending_state = None
        return error

    async def write_tombstones(self, partition: int, expired: list[TransactionMetadata]) -> None:
        """Expire ids (Kafka's transactional-id expiration): tombstones, then out of the cache."""
        cache = self._cache.get(partition)
        if cache is None:
            return
        epoch = cache.coordinator_epoch
        try:
            await self.log.append(partition, [(m.transactional_id, None) for m in expired])
            failed = False
        except Exception as failure:
            log.warning(
                "%s-%d: expiring ids failed: %s", TRANSACTION_STATE_TOPIC, partition, failure
            )
            failed = True
        cache = self._cache.get(partition)
        for metadata in expired:
            current = cache.transactions.get(metadata.transactional_id) if cache else None
            if current is not metadata:
                continue
            if (
                not failed
                and cache is not None
                and cache.coordinator_epoch == epoch
                and metadata.pending_state is TransactionState.DEAD
            ):
                del cache.transactions[metadata.transactional_id]
                continue
            metadata.pending_state = None
