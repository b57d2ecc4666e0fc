"""Reading and writing a coordinator's internal topic through the core, off the event loop.

The core's append is a blocking, flushed disk write, so it runs in an executor thread. Appends to
one partition are issued strictly in call order (a later record must win on replay); appends that
queue up while one is on disk go out together as the next batch (one flush for many commits).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from krust._core import StoredRecord

# Appends waiting behind a write are combined up to about this many bytes per batch.
_MAX_BATCH_BYTES = 1024 * 1024


class CoreLog(Protocol):
    """The part of krust._core.Broker a coordinator uses (a fake in unit tests)."""

    def internal_append(
        self, topic: str, partition: int, records: Sequence[tuple[bytes | None, bytes | None]]
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


_Pending = tuple[list[tuple[bytes, bytes | None]], "asyncio.Future[None]"]


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

    def append(self, partition: int, records: list[R]) -> asyncio.Future[None]:
        """Queue records for `partition`; the future resolves once they are on disk.

        A plain function (not a coroutine) so that the position in the queue is taken at call
        time, before the caller yields.
        """
        future: asyncio.Future[None] = self._loop.create_future()
        if not records:
            future.set_result(None)
            return future
        encoded = [self._codec.encode(record) for record in records]
        self._queues.setdefault(partition, []).append((encoded, future))
        if partition not in self._writers:
            self._writers[partition] = self._loop.create_task(self._drain(partition))
        return future

    async def _drain(self, partition: int) -> None:
        try:
            while self._queues.get(partition):
                batch = self._take_batch(partition)
                records = [record for encoded, _ in batch for record in encoded]
                try:
                    await self._loop.run_in_executor(
                        None, self._core.internal_append, self.topic, partition, records
                    )
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            del self._writers[partition]

    def _take_batch(self, partition: int) -> list[_Pending]:
        queue = self._queues[partition]
        size = 0
        taken = 0
        for encoded, _ in queue:
            size += sum(len(key) + len(value or b"") for key, value in encoded)
            if taken and size > _MAX_BATCH_BYTES:
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
    ) -> AsyncIterator[tuple[int, R | ValueError | None]]:
        """Every record of the partition, from its start to the current end, as (offset, record).

        The record is None for record types another coordinator owns, and the decoding error for
        records that do not parse (the caller logs and skips them; they stay in the log).
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
                try:
                    record = self._codec.decode(stored["key"], stored["value"])
                except ValueError as error:
                    yield offset, error
                else:
                    yield offset, record
                position = offset + 1

    async def idle(self) -> None:
        """Wait until every queued append has been written (or has failed)."""
        while self._writers:
            await asyncio.gather(*self._writers.values(), return_exceptions=True)
