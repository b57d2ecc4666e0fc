"""Sending a transaction's commit or abort markers to the leaders of its partitions (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Markers go out as WriteTxnMarkers requests grouped by destination broker, one request in flight
per broker; markers queued meanwhile ride in that broker's next request. A partition whose leader
is unknown, a broker that cannot be reached and retriable partition errors are retried after a
backoff, with the leader looked up again; a partition whose topic is gone is dropped. When every
partition of a transaction has its marker, CompleteCommit / CompleteAbort is written. Work
started under an older coordinator epoch (the partition of `__transaction_state` was reloaded or
moved) is dropped: the new coordinator finishes it.

The transport is the core's blocking `send_to_broker`; it runs in one dedicated single-thread
executor per destination, never in the loop's default executor (which serves the receiving side
of WriteTxnMarkers, also when a broker sends markers to itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.serial import entity_reader
from kio.static.primitive import i16, i32

from krust.bridge.protocol import encode_entity
from krust.coordinator.clock import Clock
from krust.transaction.metadata import TopicPartition, TransactionMetadata, TxnTransit
from krust.transaction.settings import MARKER_RETRY_BACKOFF_MS
from krust.transaction.state import TransactionStateManager

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
# What Kafka 4 sends (MetadataVersion.writeTxnMarkersRequestVersion: 1 from 2.8).
WRITE_TXN_MARKERS_VERSION = 1

_RETRIABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
    }
)
# The producer or the coordinator moved on: this transaction's markers are someone else's now.
_FENCED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
# The partition cannot take a marker at all: Kafka stops waiting for it.
_UNSUPPORTED = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


class MarkerTransport(Protocol):
    """The core's inter-broker request sender (krust._core.Core.send_to_broker)."""

    def send_to_broker(self, node_id: int, api_key: int, version: int, body: bytes) -> bytes: ...


@dataclass(eq=False)
class PendingCompleteTxn:
    """A transaction waiting for its markers, and the Complete* state to write after them."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransit


@dataclass(frozen=True)
class MarkerEntry:
    pending: PendingCompleteTxn
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


class TransactionMarkerChannelManager:
    def __init__(
        self,
        state: TransactionStateManager,
        transport: MarkerTransport,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        backoff_ms: int = MARKER_RETRY_BACKOFF_MS,
    ) -> None:
        self._state = state
        self._transport = transport
        self._clock = clock
        self._loop = loop
        self._backoff_ms = backoff_ms
        self._pending: dict[str, PendingCompleteTxn] = {}
        self._queues: dict[int, list[MarkerEntry]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._executors: dict[int, ThreadPoolExecutor] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.requests_sent = 0

    def has_pending(self, transactional_id: str) -> bool:
        return transactional_id in self._pending

    def add_markers_to_send(
        self,
        coordinator_epoch: int,
        commit: bool,
        metadata: TransactionMetadata,
        transit: TxnTransit,
    ) -> None:
        """Send the markers of a transaction now in PrepareCommit/PrepareAbort; `transit` is its
        Complete* state (pending), written once every partition has its marker."""
        pending = PendingCompleteTxn(
            metadata.transactional_id, coordinator_epoch, metadata, transit
        )
        self._pending[metadata.transactional_id] = pending
        self._queue(
            MarkerEntry(
                pending,
                metadata.producer_id,
                metadata.producer_epoch,
                commit,
                frozenset(metadata.partitions),
            )
        )
        self._maybe_write_completion(metadata.transactional_id)

    def remove_markers_for_partition(self, txn_partition: int) -> None:
        """The `__transaction_state` partition was unloaded: forget its transactions' markers."""
        for transactional_id in list(self._pending):
            if self._state.partition_for(transactional_id) == txn_partition:
                del self._pending[transactional_id]

    # -- queueing ------------------------------------------------------------------------------

    def _current(self, pending: PendingCompleteTxn) -> bool:
        """Whether the markers of `pending` are still this coordinator's to send."""
        if self._pending.get(pending.transactional_id) is not pending:
            return False
        error, entry = self._state.lookup(pending.transactional_id)
        if error is not ErrorCode.none or entry is None:
            del self._pending[pending.transactional_id]
            return False
        if entry.coordinator_epoch != pending.coordinator_epoch:
            del self._pending[pending.transactional_id]
            return False
        return True

    def _queue(self, entry: MarkerEntry) -> None:
        by_leader: dict[int, set[TopicPartition]] = {}
        gone: list[TopicPartition] = []
        unknown_leader: set[TopicPartition] = set()
        for partition in entry.partitions:
            leader = self._state.leader_of(partition)
            if leader is None:
                gone.append(partition)
            elif leader < 0:
                unknown_leader.add(partition)
            else:
                by_leader.setdefault(leader, set()).add(partition)
        for leader, partitions in by_leader.items():
            self._queues.setdefault(leader, []).append(_narrow(entry, partitions))
            if leader not in self._senders:
                self._senders[leader] = self._loop.create_task(self._send_to(leader))
        if unknown_leader:
            self._retry_later(_narrow(entry, unknown_leader))
        if gone and self._current(entry.pending):
            log.info(
                "%s: partitions %s no longer exist; their markers are skipped",
                entry.pending.transactional_id,
                sorted(gone),
            )
            for partition in gone:
                entry.pending.metadata.remove_partition(partition)
            self._maybe_write_completion(entry.pending.transactional_id)

    def _retry_later(self, entry: MarkerEntry) -> None:
        def retry() -> None:
            if self._current(entry.pending):
                self._queue(entry)

        self._clock.call_later(self._backoff_ms, retry)

    # -- sending -------------------------------------------------------------------------------

    async def _send_to(self, node_id: int) -> None:
        try:
            while self._queues.get(node_id):
                entries = [e for e in self._queues.pop(node_id) if self._current(e.pending)]
                if entries:
                    await self._send_batch(node_id, entries)
        finally:
            del self._senders[node_id]

    async def _send_batch(self, node_id: int, entries: list[MarkerEntry]) -> None:
        body = encode_entity(_request(entries))
        executor = self._executors.get(node_id)
        if executor is None:
            executor = ThreadPoolExecutor(1, thread_name_prefix=f"txn-markers-{node_id}")
            self._executors[node_id] = executor
        self.requests_sent += 1
        try:
            response = await self._loop.run_in_executor(
                executor,
                self._transport.send_to_broker,
                node_id,
                WRITE_TXN_MARKERS,
                WRITE_TXN_MARKERS_VERSION,
                body,
            )
            errors = _errors_by_producer(response)
        except Exception as failure:
            log.info("sending transaction markers to broker %d failed: %s", node_id, failure)
            for entry in entries:
                if self._current(entry.pending):
                    self._retry_later(entry)
            return
        for entry in entries:
            self._on_response(entry, errors.get(entry.producer_id, {}))

    def _on_response(self, entry: MarkerEntry, errors: dict[TopicPartition, ErrorCode]) -> None:
        pending = entry.pending
        if not self._current(pending):
            return
        retry: set[TopicPartition] = set()
        for partition in entry.partitions:
            error = errors.get(partition, ErrorCode.unknown_server_error)
            if error is ErrorCode.none or error in _UNSUPPORTED:
                pending.metadata.remove_partition(partition)
            elif error in _FENCED:
                log.info("%s: markers fenced (%s); giving up", pending.transactional_id, error.name)
                del self._pending[pending.transactional_id]
                return
            else:
                if error not in _RETRIABLE:
                    log.warning(
                        "%s: unexpected %s writing the marker to %s; retrying",
                        pending.transactional_id,
                        error.name,
                        partition,
                    )
                retry.add(partition)
        if retry:
            self._retry_later(_narrow(entry, retry))
        else:
            self._maybe_write_completion(pending.transactional_id)

    # -- completing ----------------------------------------------------------------------------

    def _maybe_write_completion(self, transactional_id: str) -> None:
        pending = self._pending.get(transactional_id)
        if pending is None or pending.metadata.partitions:
            return
        del self._pending[transactional_id]
        self._spawn(self._write_completion(pending))

    async def _write_completion(self, pending: PendingCompleteTxn) -> None:
        error = await self._state.append_transition(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.transit,
            keep_pending_on=frozenset({ErrorCode.coordinator_not_available}),
        )
        if error is ErrorCode.coordinator_not_available:

            def retry() -> None:
                self._spawn(self._write_completion(pending))

            self._clock.call_later(self._backoff_ms, retry)
        elif error is not ErrorCode.none:
            log.info(
                "%s: not writing %s (%s): the partition's new coordinator completes it",
                pending.transactional_id,
                pending.transit.state.kafka_name,
                error.name,
            )

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = self._loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def idle(self) -> None:
        """Wait until nothing is being sent or written (tests; backoffs wait for the clock)."""
        while self._senders or self._background:
            await asyncio.gather(*self._senders.values(), *self._background, return_exceptions=True)

    def close(self) -> None:
        for task in (*self._senders.values(), *self._background):
            task.cancel()
        for executor in self._executors.values():
            executor.shutdown(wait=False, cancel_futures=True)
        self._pending.clear()


def _narrow(entry: MarkerEntry, partitions: set[TopicPartition]) -> MarkerEntry:
    return MarkerEntry(
        entry.pending, entry.producer_id, entry.producer_epoch, entry.commit, frozenset(partitions)
    )


def _request(entries: list[MarkerEntry]) -> WriteTxnMarkersRequest:
    markers = []
    for entry in entries:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(entry.partitions):
            by_topic.setdefault(topic, []).append(partition)
        markers.append(
            WritableTxnMarker(
                producer_id=ProducerId(entry.producer_id),
                producer_epoch=i16(entry.producer_epoch),
                transaction_result=entry.commit,
                topics=tuple(
                    WritableTxnMarkerTopic(
                        name=TopicName(topic), partition_indexes=tuple(i32(p) for p in partitions)
                    )
                    for topic, partitions in by_topic.items()
                ),
                coordinator_epoch=i32(entry.pending.coordinator_epoch),
            )
        )
    return WriteTxnMarkersRequest(markers=tuple(markers))


def _errors_by_producer(body: bytes) -> dict[int, dict[TopicPartition, ErrorCode]]:
    response_type = load_response_schema(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
    response: Any
    response, _ = entity_reader(response_type)(body, 0)
    errors: dict[int, dict[TopicPartition, ErrorCode]] = {}
    for marker in response.markers:
        by_partition = errors.setdefault(int(marker.producer_id), {})
        for topic in marker.topics:
            for result in topic.partitions:
                by_partition[TopicPartition(topic.name, result.partition_index)] = ErrorCode(
                    result.error_code
                )
    return errors
