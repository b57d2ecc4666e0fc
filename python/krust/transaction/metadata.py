"""A transactional id's state and Kafka's state machine for it (TransactionMetadata, KIP-98).

A change is made in two steps, as in Kafka: `prepare_*` checks the transition and returns the
new state (`TxnTransit`) while marking the metadata as having a transition pending; once the
transit is durable in `__transaction_state`, `complete_transition` applies it. While a
transition is pending, other requests for the id are answered CONCURRENT_TRANSACTIONS.

KIP-360 added the epoch bump on InitProducerId with the producer's id and epoch; KIP-890 part 2
(transaction version 2, EndTxn v5+) bumps the epoch on every commit and abort, so that the
markers fence the old epoch, and rotates to a new producer id when the epoch runs out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TransactionState(enum.Enum):
    """Kafka's states with their ids in the log (TransactionLogValue.TransactionStatus)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((state for state in cls if state.kafka_name == name), None)

    @property
    def expiration_allowed(self) -> bool:
        return self in _EXPIRABLE


S = TransactionState
_EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Transaction version 2 also aborts from Empty and Complete* (the client may not know).
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition Kafka's state machine does not allow: a coordinator bug, never client input."""


def supports_epoch_bump(transaction_version: int) -> bool:
    """KIP-890 part 2: transaction version 2 bumps the epoch at every transaction end."""
    return transaction_version >= 2


def is_epoch_exhausted(epoch: int) -> bool:
    # One epoch is kept in reserve so that a fencing bump is always possible.
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransit:
    """The state a transition leads to; written to the log before it is applied."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker was written (or its topic is gone): one partition fewer to wait for."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(
                f"{self.transactional_id}: removing a partition in {self.state}"
            )
        self.partitions.discard(partition)

    # -- preparing transitions ---------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer whose epoch is at its maximum")
        # A fence whose write failed already bumped the epoch in memory: do not bump twice.
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            epoch,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """InitProducerId on an existing id; None when the expected epoch is fenced (KIP-360)."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"producer id {self.producer_id} has no epochs left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer the producer lost: give the same epoch again.
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last_epoch, txn_timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        if self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise IllegalTransition("cannot rotate the producer id of a pending transaction")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(
            S.EMPTY, new_producer_id, 0, last_epoch, txn_timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now_ms: int, client_version: int
    ) -> TxnTransit:
        starts = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.partitions | added),
            now_ms if starts else self.txn_start_timestamp,
            now_ms,
            client_version=client_version,
        )

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        client_version: int,
        next_producer_id: int,
        now_ms: int,
        no_partition_added: bool = False,
    ) -> TxnTransit:
        """`no_partition_added`: a transaction-version-2 abort from Empty or Complete*, which
        the client sends when unsure; its start time is now."""
        if supports_epoch_bump(client_version):
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            state,
            self.producer_id,
            epoch,
            last_epoch,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            now_ms if no_partition_added else self.txn_start_timestamp,
            now_ms,
            next_producer_id,
            client_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        producer_id, epoch = self.producer_id, self.producer_epoch
        if (
            supports_epoch_bump(self.client_transaction_version)
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            # The epoch ran out during this transaction: the next one uses the new producer id.
            producer_id, epoch = self.next_producer_id, 0
        # The last epoch stays the one the producer last saw (MAX - 1 when the epoch ran out).
        return self._prepare(
            state,
            producer_id,
            epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            now_ms,
            NO_PRODUCER_ID,
            self.client_transaction_version,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        txn_timeout_ms: int,
        partitions: frozenset[TopicPartition],
        txn_start_timestamp: int,
        now_ms: int,
        next_producer_id: int = NO_PRODUCER_ID,
        client_version: int | None = None,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {state} while {self.pending_state} is pending"
            )
        if producer_id < 0 or (state is not S.DEAD and epoch < 0):
            raise IllegalTransition(f"{self.transactional_id}: producer {producer_id}/{epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state} -> {state}")
        self.pending_state = state
        return TxnTransit(
            producer_id=producer_id,
            prev_producer_id=self.producer_id,
            next_producer_id=next_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            txn_timeout_ms=txn_timeout_ms,
            state=state,
            partitions=partitions,
            txn_start_timestamp=txn_start_timestamp,
            txn_last_update_timestamp=now_ms,
            client_transaction_version=(
                self.client_transaction_version if client_version is None else client_version
            ),
        )

    # -- completing them ---------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a transit once it is durable (it must be the pending one)."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {transit.state}")
        if transit.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            # Dead ends in removal from the cache; PrepareEpochFence is never written.
            raise IllegalTransition(f"{self.transactional_id}: {transit.state} is never completed")
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = transit.state


def from_transit(transactional_id: str, transit: TxnTransit) -> TransactionMetadata:
    """The metadata a loaded record describes (the log holds transits)."""
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        txn_timeout_ms=transit.txn_timeout_ms,
        state=transit.state,
        txn_last_update_timestamp=transit.txn_last_update_timestamp,
        previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id,
        partitions=set(transit.partitions),
        txn_start_timestamp=transit.txn_start_timestamp,
        client_transaction_version=transit.client_transaction_version,
    )


def with_fence_epoch(metadata: TransactionMetadata, epoch: int) -> None:
    """An epoch fence turned into an abort: the fenced epoch is now the producer's epoch."""
    metadata.pending_state = None
    metadata.producer_epoch = epoch
    metadata.last_producer_epoch = NO_PRODUCER_EPOCH


__all__ = [
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransition",
    "TopicPartition",
    "TransactionMetadata",
    "TransactionState",
    "TxnTransit",
    "from_transit",
    "is_epoch_exhausted",
    "supports_epoch_bump",
    "with_fence_epoch",
]
