"""Reading and writing a coordinator's internal topic through the core, off the event loop.

The core's append is a blocking, flushed disk write, so it runs in an executor thread. Appends to
one partition are issued strictly in call order (a later record must win on replay); appends that
queue up while one is on disk go out together as the next batch (one flush for many commits).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from krust._core import StoredRecord

# Appends waiting behind a write are combined up to about this many bytes per batch.
_MAX_BATCH_BYTES = 1024 * 1024


class CoreLog(Protocol):
    """The part of krust._core.Core a coordinator uses (a fake in unit tests)."""

    def internal_append(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        producer: tuple[int, int] | None = None,
    ) -> int: ...

    def internal_read(
        self, topic: str, partition: int, start_offset: int, max_bytes: int
    ) -> Sequence[StoredRecord]: ...

    def log_end_offset(self, topic: str, partition: int) -> int: ...


R = TypeVar("R")


class RecordCodec(Protocol[R]):
    """A coordinator's record format: its records to key and value bytes and back."""

    def encode(self, record: R) -> tuple[bytes, bytes | None]: ...

    def decode(self, key: bytes | None, value: bytes | None) -> R | None:
        """The record, None for a record type another coordinator owns; raises ValueError for
        bytes that do not parse."""
        ...


Producer = tuple[int, int]
"""A transactional producer's id and epoch (TxnOffsetCommit writes in its transaction)."""


@dataclass(frozen=True)
class EndTransaction:
    """A transaction marker read from the log: the producer's records before it are committed
    (`commit`) or aborted."""

    producer_id: int
    commit: bool


@dataclass
class _Pending:
    records: list[tuple[bytes, bytes | None]]
    producer: Producer | None
    future: asyncio.Future[None]


# A control record's type in its key: ControlRecordType.ABORT and COMMIT.
_ABORT, _COMMIT = 0, 1
_MARKER_TYPES = (_ABORT, _COMMIT)


class CoordinatorLog(Generic[R]):
    """The internal topic of one coordinator (e.g. `__consumer_offsets`), by partition."""

    def __init__(
        self,
        core: CoreLog,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        codec: RecordCodec[R],
    ) -> None:
        self._core = core
        self._loop = loop
        self.topic = topic
        self._codec = codec
        self._queues: dict[int, list[_Pending]] = {}
        self._writers: dict[int, asyncio.Task[None]] = {}

    def append(
        self, partition: int, records: list[R], producer: Producer | None = None
    ) -> asyncio.Future[None]:
        """Queue records for `partition`; the future resolves once they are on disk. With
        `producer`, they are written in that producer's transaction.

        A plain function (not a coroutine) so that the position in the queue is taken at call
        time, before the caller yields.
        """
        future: asyncio.Future[None] = self._loop.create_future()
        if not records:
            future.set_result(None)
            return future
        encoded = [self._codec.encode(record) for record in records]
        self._queues.setdefault(partition, []).append(_Pending(encoded, producer, future))
        if partition not in self._writers:
            self._writers[partition] = self._loop.create_task(self._drain(partition))
        return future

    async def _drain(self, partition: int) -> None:
        try:
            while self._queues.get(partition):
                batch = self._take_batch(partition)
                records = [record for pending in batch for record in pending.records]
                try:
                    await self._loop.run_in_executor(
                        None,
                        self._core.internal_append,
                        self.topic,
                        partition,
                        records,
                        batch[0].producer,
                    )
                except Exception as error:
                    for pending in batch:
                        if not pending.future.done():
                            pending.future.set_exception(error)
                else:
                    for pending in batch:
                        if not pending.future.done():
                            pending.future.set_result(None)
        finally:
            del self._writers[partition]

    def _take_batch(self, partition: int) -> list[_Pending]:
        """The next appends to write as one batch: of one producer (or none), in order."""
        queue = self._queues[partition]
        size = 0
        taken = 0
        for pending in queue:
            size += sum(len(key) + len(value or b"") for key, value in pending.records)
            if taken and (size > _MAX_BATCH_BYTES or pending.producer != queue[0].producer):
                break
            taken += 1
        batch, rest = queue[:taken], queue[taken:]
        if rest:
            self._queues[partition] = rest
        else:
            del self._queues[partition]
        return batch

    async def read(
        self, partition: int, chunk_bytes: int
    ) -> AsyncIterator[tuple[int, int, R | EndTransaction | ValueError | None]]:
        """Every record of the partition, from its start to the current end, as (offset,
        producer id, record).

        The producer id is -1 unless the record belongs to a transaction. The record is an
        EndTransaction for a transaction marker, None for record types another coordinator
        owns, and the decoding error for records that do not parse (the caller logs and skips
        them; they stay in the log).
        """
        end = await self._loop.run_in_executor(
            None, self._core.log_end_offset, self.topic, partition
        )
        position = 0
        while position < end:
            chunk = await self._loop.run_in_executor(
                None, self._core.internal_read, self.topic, partition, position, chunk_bytes
            )
            if not chunk:
                return
            for stored in chunk:
                offset = stored["offset"]
                if offset >= end:
                    return
                producer_id = stored["producer_id"]
                control = stored["control"]
                if control in _MARKER_TYPES:
                    yield offset, producer_id, EndTransaction(producer_id, control == _COMMIT)
                elif control is not None:
                    yield offset, producer_id, ValueError(f"control record of type {control}")
                else:
                    try:
                        record = self._codec.decode(stored["key"], stored["value"])
                    except ValueError as error:
                        yield offset, producer_id, error
                    else:
                        yield offset, producer_id, record
                position = offset + 1

    async def idle(self) -> None:
        """Wait until every queued append has been written (or has failed)."""
        while self._writers:
            await asyncio.gather(*self._writers.values(), return_exceptions=True)
