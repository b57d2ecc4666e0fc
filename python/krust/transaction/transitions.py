"""The checks of Kafka's TransactionCoordinator that turn an InitProducerId or an EndTxn into a
transition of the id's metadata (or an error), without side effects beyond preparing it.

A transition that needs a new producer id first (the epoch runs out) answers NEED_PRODUCER_ID;
the coordinator fetches one from the core and asks again.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from krust.transaction.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
    supports_epoch_bump,
    with_fence_epoch,
)

S = TransactionState


class NeedProducerId:
    """The transition needs a new producer id first (an exhausted epoch)."""


NEED_PRODUCER_ID = NeedProducerId()
Prepared = tuple[TxnTransit, bool] | ErrorCode | NeedProducerId
"""A prepared transition (and whether it fences the epoch), an error, or NEED_PRODUCER_ID."""


def prepare_init(
    metadata: TransactionMetadata,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    fresh: int | None,
    now_ms: int,
) -> Prepared:
    """InitProducerId on an existing id: the transition, an error, or NEED_PRODUCER_ID."""
    if metadata.pending_transition:
        return ErrorCode.concurrent_transactions
    if expected is not None:
        producer_id, epoch = expected
        # A just-created id, its current producer id, or a retry after a rotation.
        valid = (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == metadata.producer_id
            or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
        )
        if not valid:
            return ErrorCode.producer_fenced
    state = metadata.state
    if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        return ErrorCode.concurrent_transactions
    if state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
        if metadata.epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            if fresh is None:
                return NEED_PRODUCER_ID
            rotation = metadata.prepare_producer_id_rotation(
                fresh, timeout_ms, now_ms, expected is not None
            )
            return rotation, False
        transit = metadata.prepare_increment_producer_epoch(
            timeout_ms, expected[1] if expected else None, now_ms
        )
        return ErrorCode.producer_fenced if transit is None else (transit, False)
    if state is S.ONGOING:
        return metadata.prepare_fence_producer_epoch(), True
    raise IllegalTransition(f"{metadata.transactional_id} is {state.kafka_name}")


def prepare_end(
    metadata: TransactionMetadata,
    producer_id: int,
    epoch: int,
    commit: bool,
    from_client: bool,
    client_version: int,
    next_producer_id: int | None,
    now_ms: int,
) -> Prepared:
    """EndTxn (or an abort by a fence or a timeout): the transition and whether it is an epoch
    fence, an error (NONE: already done, a retry), or NEED_PRODUCER_ID."""
    if not supports_epoch_bump(client_version):
        return _prepare_end_v1(metadata, producer_id, epoch, commit, from_client, now_ms)
    fencing = metadata.pending_state is S.PREPARE_EPOCH_FENCE
    # KIP-890: a retry of an EndTxn whose answer was lost finds the epoch already bumped,
    # or, after the epoch ran out, the new producer id at epoch 0.
    retry_on_overflow = (
        not fencing
        and metadata.previous_producer_id == producer_id
        and epoch == MAX_EPOCH - 1
        and metadata.producer_epoch == 0
    )
    retry_on_bump = not fencing and metadata.producer_epoch == epoch + 1
    retry = retry_on_bump or retry_on_overflow
    state = metadata.state
    if fencing:
        valid = (not from_client or epoch == metadata.producer_epoch) and (
            epoch >= metadata.producer_epoch
        )
    elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        valid = retry_on_bump
    elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        valid = retry or epoch == metadata.producer_epoch
    else:
        valid = epoch == metadata.producer_epoch
    if metadata.producer_id != producer_id and not retry_on_overflow:
        return ErrorCode.invalid_producer_id_mapping
    if not valid:
        return ErrorCode.producer_fenced
    if metadata.pending_transition and not fencing:
        return ErrorCode.concurrent_transactions
    # Kafka's table for transaction version 2 (Retry: the epoch before the bump):
    #                  abort: retry / current     commit: retry / current
    #  Empty            (fenced) / bump            (fenced) / INVALID_TXN_STATE
    #  CompleteAbort    NONE / bump                INVALID_TXN_STATE
    #  CompleteCommit   INVALID_TXN_STATE / bump   NONE / INVALID_TXN_STATE
    if state is S.ONGOING:
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        return _prepare_completion(
            metadata, next_state, epoch, fencing, client_version, next_producer_id, False, now_ms
        )
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        same = state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        return ErrorCode.concurrent_transactions if same else ErrorCode.invalid_txn_state
    done = state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    if retry and done:
        return ErrorCode.none
    if not commit and not retry and state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return _prepare_completion(
            metadata,
            S.PREPARE_ABORT,
            epoch,
            fencing,
            client_version,
            next_producer_id,
            True,
            now_ms,
        )
    if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return ErrorCode.invalid_txn_state
    raise IllegalTransition(f"{metadata.transactional_id} is {state.kafka_name}")


def _prepare_completion(
    metadata: TransactionMetadata,
    next_state: TransactionState,
    epoch: int,
    fencing: bool,
    client_version: int,
    next_producer_id: int | None,
    no_partition_added: bool,
    now_ms: int,
) -> Prepared:
    new_producer_id = NO_PRODUCER_ID
    if supports_epoch_bump(client_version) and not fencing and metadata.epoch_exhausted:
        # The bump would exhaust the epoch: the next transaction gets a new producer id.
        if next_producer_id is None:
            return NEED_PRODUCER_ID
        new_producer_id = next_producer_id
    epoch_fence = next_state is S.PREPARE_ABORT and fencing
    if epoch_fence:
        with_fence_epoch(metadata, epoch)
    transit = metadata.prepare_abort_or_commit(
        next_state, client_version, new_producer_id, now_ms, no_partition_added
    )
    return transit, epoch_fence


def _prepare_end_v1(
    metadata: TransactionMetadata,
    producer_id: int,
    epoch: int,
    commit: bool,
    from_client: bool,
    now_ms: int,
) -> Prepared:
    """EndTxn before transaction version 2: the epoch must match exactly (a fence or a
    timeout may end it with a newer epoch)."""
    fencing = metadata.pending_state is S.PREPARE_EPOCH_FENCE
    if metadata.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if (from_client and epoch != metadata.producer_epoch) or epoch < metadata.producer_epoch:
        return ErrorCode.producer_fenced
    if metadata.pending_transition and not fencing:
        return ErrorCode.concurrent_transactions
    state = metadata.state
    if state is S.ONGOING:
        next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        return _prepare_completion(metadata, next_state, epoch, fencing, 0, None, False, now_ms)
    if state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
        return ErrorCode.none
    if state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return ErrorCode.concurrent_transactions
    if state in (
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
        S.PREPARE_COMMIT,
        S.PREPARE_ABORT,
    ):
        return ErrorCode.invalid_txn_state
    raise IllegalTransition(f"{metadata.transactional_id} is {state.kafka_name}")
