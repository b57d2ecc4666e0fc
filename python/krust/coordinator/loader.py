"""Replaying one partition of a coordinator's internal topic, as Kafka's coordinator loader does.

Records are handed to the coordinator in log order. A record whose bytes do not parse, or that
the coordinator refuses (`apply` raises ValueError), is logged and skipped, and stays in the log
untouched: one bad or forged record must neither stop the load nor leave half-applied state.
Records of types another coordinator owns (the codec decodes them to None) are passed over.

Records written in a producer's transaction (TxnOffsetCommit's offsets in `__consumer_offsets`)
go to the coordinator's `Transactions` as pending, and its transaction marker commits or aborts
them, as Kafka's loader hands them to `replayEndTransactionMarker`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from krust.coordinator.log import CoordinatorLog, EndTransaction

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass
class ReplayStats:
    records: int = 0
    skipped: int = 0


R_contra = TypeVar("R_contra", contravariant=True)


class Transactions(Protocol[R_contra]):
    """A coordinator's records that wait for their transaction's marker."""

    def apply_pending(self, producer_id: int, record: R_contra) -> None:
        """Keep a record of the producer's open transaction; raise ValueError to refuse it."""

    def end(self, producer_id: int, commit: bool) -> object:
        """The producer's transaction ended: apply its pending records, or drop them."""


async def replay(
    coordinator_log: CoordinatorLog[R],
    partition: int,
    chunk_bytes: int,
    apply: Callable[[R], None],
    transactions: Transactions[R] | None = None,
) -> ReplayStats:
    """Apply every record of the partition, from its start to its current end. Without
    `transactions`, the coordinator writes no transactional records: markers are passed over."""
    stats = ReplayStats()
    async for offset, producer_id, record in coordinator_log.read(partition, chunk_bytes):
        stats.records += 1
        if record is None:
            continue
        try:
            if isinstance(record, ValueError):
                raise record
            if isinstance(record, EndTransaction):
                if transactions is not None:
                    transactions.end(record.producer_id, record.commit)
            elif producer_id >= 0 and transactions is not None:
                transactions.apply_pending(producer_id, record)
            else:
                apply(record)
        except ValueError as error:
            log.warning(
                "%s-%d offset %d: skipping a malformed record: %s",
                coordinator_log.topic,
                partition,
                offset,
                error,
            )
            stats.skipped += 1
    return stats
