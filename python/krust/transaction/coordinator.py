"""The transaction coordinator (KIP-98): producer ids and epochs of transactional producers, the
partitions of their transactions, and two-phase commit with markers (Kafka's
TransactionCoordinator).

Every operation follows Kafka's order: check the request against the id's metadata, prepare the
transition (the id is then busy: CONCURRENT_TRANSACTIONS), write it to `__transaction_state`,
apply it, answer. EndTxn then sends the markers (markers.py), which write the Complete* state
when done. Timeouts and expiration run on the injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from krust.coordinator.clock import Cancellable, Clock
from krust.coordinator.log import CoreLog
from krust.coordinator.partitioner import partition_for
from krust.group.records import OFFSETS_TOPIC
from krust.group.results import CoordinatorLocation
from krust.transaction.markers import MarkerTransport, TransactionMarkerChannelManager
from krust.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    supports_epoch_bump,
)
from krust.transaction.settings import TransactionCoordinatorConfig
from krust.transaction.state import ControllerView, TransactionStateManager
from krust.transaction.transitions import (
    NEED_PRODUCER_ID,
    NeedProducerId,
    prepare_end,
    prepare_init,
)

log = logging.getLogger(__name__)
S = TransactionState


class TransactionCore(CoreLog, MarkerTransport, Protocol):
    """The parts of krust._core.Core the transaction coordinator uses."""

    def next_producer_id(self) -> int: ...


@dataclass(frozen=True)
class ProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class DescribedTransaction:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionCoordinatorConfig,
        core: TransactionCore,
        controller: ControllerView,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self._core = core
        self._clock = clock
        self._loop = loop
        self.state = TransactionStateManager(config, core, controller, clock, loop)
        self.markers = TransactionMarkerChannelManager(self.state, core, clock, loop)
        self.state.on_loaded = self._complete_loaded
        self.state.on_unloaded = self.markers.remove_markers_for_partition
        self._controller = controller
        self._timers: list[Cancellable] = []
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.state.sync_partitions()
        self._controller.on_metadata_change(self.state.sync_partitions)
        self._every(
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.abort_timed_out_transactions,
        )
        self._every(
            self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
            self.remove_expired_transactional_ids,
        )

    def _every(self, interval_ms: int, work: Any) -> None:
        index = len(self._timers)

        def fire() -> None:
            work()
            self._timers[index] = self._clock.call_later(interval_ms, fire)

        self._timers.append(self._clock.call_later(interval_ms, fire))

    async def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self.state.close()
        self.markers.close()
        for task in self._background:
            task.cancel()
        await self.state.log.idle()

    async def idle(self) -> None:
        """Wait until loads, background work, markers and writes are done (tests)."""
        while self._background or self.state.loads():
            await asyncio.gather(*self._background, *self.state.loads(), return_exceptions=True)
        await self.markers.idle()
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.state.log.idle()

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = self._loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _complete_loaded(self, coordinator_epoch: int, pending: list[TransactionMetadata]) -> None:
        """After a load: a transaction found in PrepareCommit/PrepareAbort gets its markers."""
        now = self._clock.now_ms()
        for metadata in pending:
            if metadata.pending_transition:
                continue
            commit = metadata.state is S.PREPARE_COMMIT
            complete = metadata.prepare_complete(now)
            self.markers.add_markers_to_send(coordinator_epoch, commit, metadata, complete)

    async def _new_producer_id(self) -> int | ErrorCode:
        try:
            return int(await self._loop.run_in_executor(None, self._core.next_producer_id))
        except Exception as failure:
            # Kafka answers this while its producer-id block is being fetched: retriable.
            log.warning("no producer id available: %s", failure)
            return ErrorCode.coordinator_load_in_progress

    def partition_exists(self, partition: TopicPartition) -> bool:
        return self.state.leader_of(partition) is not None

    def offsets_partition(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of a group, as the group coordinator maps it."""
        topic = self._controller.image.topics.get(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic else self.config.offsets_topic_num_partitions
        return partition_for(group_id, count)

    # -- FindCoordinator -----------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str, listener: str) -> CoordinatorLocation:
        if not await self.state.ensure_topic():
            return CoordinatorLocation(ErrorCode.coordinator_not_available)
        topic = self.state.topic()
        image = self._controller.image
        partition = (
            topic.partitions.get(self.state.partition_for(transactional_id)) if topic else None
        )
        broker = image.brokers.get(partition.leader) if partition is not None else None
        if partition is None or broker is None:
            return CoordinatorLocation(ErrorCode.coordinator_not_available)
        if partition.leader == image.node_id:
            self.state.lookup(transactional_id)  # start loading now, so the id is ready sooner
        host, port = broker.address_for(listener)
        return CoordinatorLocation(ErrorCode.none, broker.node_id, host, port)

    # -- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> ProducerIdResult:
        """`expected` is the producer's (id, epoch) when it asks for a bump (KIP-360)."""
        if not transactional_id:
            return ProducerIdResult(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ProducerIdResult(ErrorCode.invalid_transaction_timeout)
        fresh: int | None = None
        while True:
            error, entry = self.state.lookup(transactional_id)
            if error is ErrorCode.none and entry is None and fresh is not None:
                entry = self.state.put_if_absent(
                    TransactionMetadata(
                        transactional_id=transactional_id,
                        producer_id=fresh,
                        producer_epoch=NO_PRODUCER_EPOCH,
                        txn_timeout_ms=timeout_ms,
                        state=S.EMPTY,
                        txn_last_update_timestamp=self._clock.now_ms(),
                    )
                )
                fresh = None
            if error is not ErrorCode.none:
                return ProducerIdResult(error)
            prepared = (
                NEED_PRODUCER_ID
                if entry is None
                else prepare_init(entry.metadata, timeout_ms, expected, fresh, self._clock.now_ms())
            )
            if not isinstance(prepared, NeedProducerId):
                break
            generated = await self._new_producer_id()
            if isinstance(generated, ErrorCode):
                return ProducerIdResult(generated)
            fresh = generated
        assert entry is not None
        if isinstance(prepared, ErrorCode):
            return ProducerIdResult(prepared)
        transit, _ = prepared
        metadata = entry.metadata
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction with the bumped epoch; the producer retries.
            error = (await self._abort_fenced(metadata, transit)).error
            return ProducerIdResult(
                ErrorCode.concurrent_transactions if error is ErrorCode.none else error
            )
        error = await self.state.append_transition(
            transactional_id, entry.coordinator_epoch, transit
        )
        if error is not ErrorCode.none:
            return ProducerIdResult(error)
        return ProducerIdResult(ErrorCode.none, transit.producer_id, transit.producer_epoch)

    # -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        client_version: int = 0,
    ) -> ErrorCode:
        """`client_version`: 2 for AddPartitionsToTxn v4+ (brokers on behalf of transaction
        version 2 producers), 0 for producers' own requests and AddOffsetsToTxn, as Kafka."""
        if not transactional_id:
            return ErrorCode.invalid_request
        error, entry = self.state.lookup(transactional_id)
        if error is not ErrorCode.none:
            return error
        if entry is None or entry.metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        metadata = entry.metadata
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if metadata.pending_transition or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if metadata.state is S.ONGOING and partitions <= metadata.partitions:
            return ErrorCode.none
        transit = metadata.prepare_add_partitions(partitions, self._clock.now_ms(), client_version)
        return await self.state.append_transition(
            transactional_id, entry.coordinator_epoch, transit
        )

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: whether each partition is in the producer's ongoing transaction
        (TRANSACTION_ABORTABLE when not); one error for all when the producer is not current."""
        error = ErrorCode.none
        entry = None
        if not transactional_id:
            error = ErrorCode.invalid_request
        else:
            error, entry = self.state.lookup(transactional_id)
        if error is ErrorCode.none:
            if entry is None or entry.metadata.producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif entry.metadata.producer_epoch != producer_epoch:
                error = ErrorCode.producer_fenced
            elif entry.metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = ErrorCode.concurrent_transactions
        if error is not ErrorCode.none or entry is None:
            return dict.fromkeys(partitions, error)
        ongoing = entry.metadata.partitions
        return {
            p: ErrorCode.none if p in ongoing else ErrorCode.transaction_abortable
            for p in partitions
        }

    # -- EndTxn --------------------------------------------------------------------------------

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: int,
    ) -> ProducerIdResult:
        """`client_version` 2 (EndTxn v5+) bumps the epoch; the result carries the producer's
        id and epoch to use next."""
        return await self._end_transaction(
            transactional_id, producer_id, producer_epoch, commit, True, client_version
        )

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        client_version: int,
    ) -> ProducerIdResult:
        if not transactional_id:
            return ProducerIdResult(ErrorCode.invalid_request)
        next_producer_id: int | None = None
        while True:
            error, entry = self.state.lookup(transactional_id)
            if error is not ErrorCode.none:
                return ProducerIdResult(error)
            if entry is None:
                return ProducerIdResult(ErrorCode.invalid_producer_id_mapping)
            prepared = prepare_end(
                entry.metadata,
                producer_id,
                producer_epoch,
                commit,
                from_client,
                client_version,
                next_producer_id,
                self._clock.now_ms(),
            )
            if not isinstance(prepared, NeedProducerId):
                break
            generated = await self._new_producer_id()
            if isinstance(generated, ErrorCode):
                return ProducerIdResult(generated)
            next_producer_id = generated
        metadata = entry.metadata
        if isinstance(prepared, ErrorCode):
            if prepared is ErrorCode.none:  # already complete: a retry
                return ProducerIdResult(prepared, metadata.producer_id, metadata.producer_epoch)
            return ProducerIdResult(prepared)
        transit, epoch_fence = prepared
        error = await self.state.append_transition(
            transactional_id, entry.coordinator_epoch, transit
        )
        if error is not ErrorCode.none:
            _, after = self.state.lookup(transactional_id)
            if (
                epoch_fence
                and after is not None
                and after.coordinator_epoch == entry.coordinator_epoch
            ):
                # The epoch was bumped in memory but not written: do not bump it again.
                after.metadata.has_failed_epoch_fence = True
            return ProducerIdResult(error)
        return self._send_markers(
            transactional_id,
            entry.coordinator_epoch,
            producer_id,
            producer_epoch,
            commit,
            client_version,
        )

    def _send_markers(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: int,
    ) -> ProducerIdResult:
        error, entry = self.state.lookup(transactional_id)
        if error is not ErrorCode.none:
            return ProducerIdResult(error)
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return ProducerIdResult(ErrorCode.not_coordinator)
        metadata = entry.metadata
        if metadata.producer_id != producer_id:
            return ProducerIdResult(ErrorCode.invalid_producer_id_mapping)
        # Transaction version 2 bumped the epoch with the Prepare* write.
        bumped = (
            supports_epoch_bump(client_version) and metadata.producer_epoch == producer_epoch + 1
        )
        if metadata.producer_epoch != producer_epoch and not bumped:
            return ProducerIdResult(ErrorCode.producer_fenced)
        if metadata.pending_transition:
            return ProducerIdResult(ErrorCode.concurrent_transactions)
        expected = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if metadata.state is not expected:
            return ProducerIdResult(ErrorCode.invalid_txn_state)
        complete = metadata.prepare_complete(self._clock.now_ms())
        self.markers.add_markers_to_send(coordinator_epoch, commit, metadata, complete)
        return ProducerIdResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)

    # -- DescribeTransactions, ListTransactions ------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        if not transactional_id:
            return DescribedTransaction(transactional_id, ErrorCode.invalid_request)
        error, entry = self.state.lookup(transactional_id)
        if error is not ErrorCode.none:
            return DescribedTransaction(transactional_id, error)
        if entry is None or entry.metadata.state is S.DEAD:
            return DescribedTransaction(transactional_id, ErrorCode.transactional_id_not_found)
        metadata = entry.metadata
        return DescribedTransaction(
            transactional_id,
            ErrorCode.none,
            metadata.state.kafka_name,
            metadata.txn_timeout_ms,
            metadata.txn_start_timestamp,
            metadata.producer_id,
            metadata.producer_epoch,
            tuple(sorted(metadata.partitions)),
        )

    def list_transactions(
        self,
        states: list[str],
        producer_ids: list[int],
        duration_ms: int = -1,
        pattern: re.Pattern[str] | None = None,
    ) -> tuple[ErrorCode, list[str], list[ListedTransaction]]:
        """(error, unknown state filters, transactions) of the loaded partitions (KIP-664,
        KIP-994 duration filter)."""
        if self.state.any_loading():
            return ErrorCode.coordinator_load_in_progress, [], []
        wanted = {s: S.from_name(s) for s in states}
        unknown = [name for name, state in wanted.items() if state is None]
        filter_states = {state for state in wanted.values() if state is not None}
        now = self._clock.now_ms()
        listed = [
            ListedTransaction(m.transactional_id, m.producer_id, m.state.kafka_name)
            for _, cache in self.state.loaded()
            for m in cache.transactions.values()
            if m.state is not S.DEAD
            and (not producer_ids or m.producer_id in producer_ids)
            and (not states or m.state in filter_states)
            and (duration_ms < 0 or now - m.txn_start_timestamp > duration_ms)
            and (pattern is None or pattern.fullmatch(m.transactional_id) is not None)
        ]
        return ErrorCode.none, unknown, listed

    # -- timeouts and expiration ---------------------------------------------------------------

    def abort_timed_out_transactions(self) -> None:
        """Abort, with an epoch bump that fences the producer, every transaction running
        longer than its timeout."""
        now = self._clock.now_ms()
        for _, cache in self.state.loaded():
            for metadata in list(cache.transactions.values()):
                if (
                    metadata.pending_transition
                    or metadata.state is not S.ONGOING
                    or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now
                ):
                    continue
                log.info("%s: transaction timed out; aborting it", metadata.transactional_id)
                transit = metadata.prepare_fence_producer_epoch()
                self._spawn(self._abort_timed_out(metadata, transit))

    async def _abort_fenced(
        self, metadata: TransactionMetadata, fence: TxnTransit
    ) -> ProducerIdResult:
        """Abort the ongoing transaction at the epoch PrepareEpochFence bumped (a new
        InitProducerId's fencing, or a timeout)."""
        result = await self._end_transaction(
            metadata.transactional_id,
            fence.producer_id,
            fence.producer_epoch,
            commit=False,
            from_client=False,
            client_version=self.state.transaction_version(),
        )
        if metadata.pending_state is S.PREPARE_EPOCH_FENCE:
            metadata.pending_state = None
        return result

    async def _abort_timed_out(self, metadata: TransactionMetadata, fence: TxnTransit) -> None:
        result = await self._abort_fenced(metadata, fence)
        if result.error is not ErrorCode.none:
            log.info("%s: timeout abort not done: %s", metadata.transactional_id, result.error.name)

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone ids with no transaction under way, idle past transactional.id.expiration.ms."""
        horizon = self._clock.now_ms() - self.config.transactional_id_expiration_ms
        for partition, cache in self.state.loaded():
            expired = [
                metadata
                for metadata in cache.transactions.values()
                if not metadata.pending_transition
                and metadata.state.expiration_allowed
                and metadata.txn_last_update_timestamp <= horizon
            ]
            for metadata in expired:
                metadata.prepare_dead()
            if expired:
                self._spawn(self.state.write_tombstones(partition, expired))
