"""Kafka's CurrentAssignmentBuilder cases, one reconciliation step at a time: a partition is
revoked before it moves, given only when free, and the epochs move as Kafka's do."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest
from krust.group.consumer.member import ConsumerGroupMember, MemberState
from krust.group.consumer.reconciliation import PartitionEpoch, reconcile
from krust.group.results import CoordinatorError, ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
BOTH = frozenset({T1, T2})
STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def parts(**by_topic: set[int]) -> dict[uuid.UUID, frozenset[int]]:
    ids = {"t1": T1, "t2": T2}
    return {ids[name]: frozenset(p) for name, p in by_topic.items()}


def member(
    epoch: int,
    state: MemberState = STABLE,
    assigned: Mapping[uuid.UUID, frozenset[int]] | None = None,
    revoking: Mapping[uuid.UUID, frozenset[int]] | None = None,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "m",
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        state=state,
        assigned_partitions=assigned or {},
        partitions_pending_revocation=revoking or {},
    )


def owners(**owned: set[int]) -> PartitionEpoch:
    """A partition epoch function: the listed partitions are owned by someone (epoch 9)."""
    taken = {(t, p) for t, ps in parts(**owned).items() for p in ps}
    return lambda topic, partition: 9 if (topic, partition) in taken else -1


FREE = owners()


def owned_list(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[tuple[uuid.UUID, list[int]]]:
    return [(t, sorted(p)) for t, p in assignment.items()]


def test_stable_member_gets_new_free_partitions_and_the_target_epoch() -> None:
    current = member(10, assigned=parts(t1={1, 2}))
    after = reconcile(current, 11, parts(t1={1, 2, 3}, t2={4}), FREE, [], BOTH)
    assert (after.state, after.member_epoch, after.previous_member_epoch) == (STABLE, 11, 10)
    assert after.assigned_partitions == parts(t1={1, 2, 3}, t2={4})


def test_partitions_to_revoke_keep_the_member_at_its_epoch() -> None:
    current = member(10, assigned=parts(t1={1, 2, 3}))
    owned = owned_list(current.assigned_partitions)
    after = reconcile(current, 11, parts(t1={1}, t2={4}), FREE, owned, BOTH)
    assert (after.state, after.member_epoch) == (UNREVOKED, 10)
    assert after.assigned_partitions == parts(t1={1})
    assert after.partitions_pending_revocation == parts(t1={2, 3})


def test_a_member_that_already_dropped_them_moves_on_at_once() -> None:
    current = member(10, assigned=parts(t1={1, 2, 3}))
    after = reconcile(current, 11, parts(t1={1}, t2={4}), FREE, [(T1, [1])], BOTH)
    assert (after.state, after.member_epoch) == (STABLE, 11)
    assert after.assigned_partitions == parts(t1={1}, t2={4})


def test_unrevoked_waits_while_the_member_still_reports_them() -> None:
    current = member(10, UNREVOKED, assigned=parts(t1={1}), revoking=parts(t1={2}))
    still = reconcile(current, 11, parts(t1={1}, t2={4}), FREE, [(T1, [1, 2])], BOTH)
    assert still is current
    # Owned partitions not sent (null): nothing can be assumed revoked.
    assert reconcile(current, 11, parts(t1={1}, t2={4}), FREE, None, BOTH) is current


def test_unrevoked_to_stable_once_revoked() -> None:
    current = member(10, UNREVOKED, assigned=parts(t1={1}), revoking=parts(t1={2}))
    after = reconcile(current, 11, parts(t1={1}, t2={4}), FREE, [(T1, [1])], BOTH)
    assert (after.state, after.member_epoch, after.previous_member_epoch) == (STABLE, 11, 10)
    assert after.assigned_partitions == parts(t1={1}, t2={4})
    assert after.partitions_pending_revocation == {}


def test_partitions_still_owned_elsewhere_wait_in_unreleased() -> None:
    current = member(10, UNREVOKED, assigned=parts(t1={1}), revoking=parts(t1={2}))
    after = reconcile(current, 11, parts(t1={1}, t2={4, 5}), owners(t2={5}), [(T1, [1])], BOTH)
    assert (after.state, after.member_epoch) == (UNRELEASED, 11)
    assert after.assigned_partitions == parts(t1={1}, t2={4})
    # Released later: the next step gives it and the member is Stable.
    later = reconcile(after, 11, parts(t1={1}, t2={4, 5}), FREE, [(T1, [1]), (T2, [4])], BOTH)
    assert (later.state, later.member_epoch) == (STABLE, 11)
    assert later.assigned_partitions == parts(t1={1}, t2={4, 5})


def test_unreleased_stays_while_the_owner_holds_on() -> None:
    current = member(11, UNRELEASED, assigned=parts(t1={1}))
    after = reconcile(current, 11, parts(t1={1, 2}), owners(t1={2}), [(T1, [1])], BOTH)
    assert (after.state, after.assigned_partitions) == (UNRELEASED, parts(t1={1}))


def test_its_own_partition_pending_revocation_is_not_unreleased() -> None:
    # Revoking t1-2 while the newest target gives t1-2 back: it is the member's own.
    current = member(10, UNREVOKED, assigned=parts(t1={1}), revoking=parts(t1={2}))
    after = reconcile(current, 12, parts(t1={1, 2}), owners(t1={2}), [(T1, [1])], BOTH)
    assert (after.state, after.assigned_partitions) == (STABLE, parts(t1={1, 2}))


def test_a_topic_no_longer_subscribed_is_revoked_at_the_same_epoch() -> None:
    current = member(11, assigned=parts(t1={1}, t2={4}))
    owned = owned_list(current.assigned_partitions)
    after = reconcile(current, 11, parts(t1={1}, t2={4}), FREE, owned, frozenset({T1}))
    assert (after.state, after.member_epoch) == (UNREVOKED, 11)
    assert after.assigned_partitions == parts(t1={1})
    assert after.partitions_pending_revocation == parts(t2={4})


def test_unknown_state_fences_a_member_that_owns_partitions() -> None:
    current = member(10, MemberState.UNKNOWN, assigned=parts(t1={1}))
    with pytest.raises(CoordinatorError) as refused:
        reconcile(current, 11, parts(t1={1}), FREE, [(T1, [1])], BOTH)
    assert refused.value.error is ErrorCode.fenced_member_epoch
    fresh = reconcile(current, 11, parts(t1={1}), FREE, [], BOTH)
    assert (fresh.state, fresh.member_epoch) == (STABLE, 11)
