"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and KIP-447).

They are written to `__consumer_offsets` in the producer's transaction and stay pending, invisible
to OffsetFetch, until the transaction's marker: COMMIT applies them as ordinary committed offsets,
ABORT drops them. The same happens when a partition is replayed: the records of a transaction are
held until its marker is read, and a transaction still open at the end of the log stays pending.
"""

from __future__ import annotations

from collections.abc import Callable

from krust.group.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue


class TransactionalOffsets:
    def __init__(self, apply: Callable[[CoordinatorRecord], None]) -> None:
        """`apply` makes a committed transaction's offset record visible."""
        self._apply = apply
        self._by_producer: dict[int, dict[OffsetCommitKey, OffsetCommitValue]] = {}

    def apply_pending(self, producer_id: int, record: CoordinatorRecord) -> None:
        """Hold an offset record of the producer's open transaction (a later one for the same
        partition replaces it)."""
        key, value = record
        if not isinstance(key, OffsetCommitKey) or not isinstance(value, OffsetCommitValue):
            raise ValueError(
                f"a transaction holds only offset commits, not a {type(key).__name__} "
                f"with a {type(value).__name__}"
            )
        self._by_producer.setdefault(producer_id, {})[key] = value

    def end(
        self, producer_id: int, commit: bool, in_scope: Callable[[str], bool] = lambda _: True
    ) -> int:
        """The producer's transaction ended: apply (`commit`) or drop its pending offsets of
        the groups `in_scope` (those of the marker's partition). Returns how many there were."""
        pending = self._by_producer.get(producer_id, {})
        ended = [key for key in pending if in_scope(key.group)]
        for key in ended:
            value = pending.pop(key)
            if commit:
                self._apply((key, value))
        if not pending:
            self._by_producer.pop(producer_id, None)
        return len(ended)

    def is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of this group and partition (KIP-447's
        require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        key = OffsetCommitKey(group_id, topic, partition)
        return any(key in pending for pending in self._by_producer.values())

    def merge(self, loaded: TransactionalOffsets) -> None:
        """Take over the transactions still open in a replayed partition."""
        for producer_id, pending in loaded._by_producer.items():
            self._by_producer.setdefault(producer_id, {}).update(pending)

    def drop_groups(self, in_scope: Callable[[str], bool]) -> None:
        """Forget the pending offsets of unloaded groups."""
        for producer_id, pending in list(self._by_producer.items()):
            for key in [key for key in pending if in_scope(key.group)]:
                del pending[key]
            if not pending:
                del self._by_producer[producer_id]
