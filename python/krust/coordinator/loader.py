"""Replaying one partition of a coordinator's internal topic, as Kafka's coordinator loader does.

Records are handed to the coordinator in log order. A record whose bytes do not parse, or that
the coordinator refuses (`apply` raises ValueError), is logged and skipped, and stays in the log
untouched: one bad or forged record must neither stop the load nor leave half-applied state.
Records of types another coordinator owns (the codec decodes them to None) are passed over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from krust.coordinator.log import CoordinatorLog

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass
class ReplayStats:
    records: int = 0
    skipped: int = 0


async def replay(
    coordinator_log: CoordinatorLog[R],
    partition: int,
    chunk_bytes: int,
    apply: Callable[[R], None],
) -> ReplayStats:
    """Apply every record of the partition, from its start to its current end."""
    stats = ReplayStats()
    async for offset, record in coordinator_log.read(partition, chunk_bytes):
        stats.records += 1
        if record is None:
            continue
        try:
            if isinstance(record, ValueError):
                raise record
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
