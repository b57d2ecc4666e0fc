"""PartitionChangeBuilder: elections, epochs and reassignment completion, as Kafka's."""

from __future__ import annotations

from krust.controller.image import PartitionImage
from krust.controller.partition_change import (
    NO_LEADER,
    RECOVERING,
    Election,
    PartitionChangeBuilder,
    ReassignmentReplicas,
)
from krust.controller.records import NO_LEADER_CHANGE, PartitionChangeRecord

from .cluster_images import TOPIC_ID


def partition(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, **fields: object
) -> PartitionImage:
    return PartitionImage(0, leader, 5, 9, replicas, isr, **fields)  # type: ignore[arg-type]


def build(
    current: PartitionImage,
    alive: set[int],
    election: Election = Election.ONLINE,
    isr: tuple[int, ...] | None = None,
) -> PartitionChangeRecord | None:
    builder = PartitionChangeBuilder(current, TOPIC_ID, lambda r: r in alive, election)
    if isr is not None:
        builder.target_isr = isr
    return builder.build()


def test_nothing_to_change_builds_nothing() -> None:
    assert build(partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}) is None


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member() -> None:
    record = build(partition((1, 2, 3), (1, 2, 3), 1), {2, 3}, isr=(2, 3))
    assert record is not None and (record.leader, record.isr) == (2, (2, 3))


def test_the_current_leader_stays_while_it_can_lead() -> None:
    record = build(partition((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}, isr=(2, 3))
    assert record is not None and (record.leader, record.isr) == (NO_LEADER_CHANGE, (2, 3))


def test_without_an_eligible_isr_member_there_is_no_leader_and_the_isr_keeps_its_last() -> None:
    record = build(partition((1, 2), (1,), 1), {2}, isr=())
    assert record == PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=NO_LEADER)


def test_an_unclean_election_takes_a_live_replica_outside_the_isr() -> None:
    record = build(partition((1, 2), (1,), 1), {2}, Election.UNCLEAN, isr=())
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (2, (2,), RECOVERING)


def test_the_preferred_replica_leads_again_when_it_is_in_sync() -> None:
    record = build(partition((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}, Election.PREFERRED)
    assert record is not None and record.leader == 1
    out_of_sync = build(partition((1, 2, 3), (2, 3), 2), {1, 2, 3}, Election.PREFERRED)
    assert out_of_sync is None


def test_a_reassignment_completes_once_every_target_is_in_sync() -> None:
    moving = partition((3, 1, 2), (1, 2), 1, adding_replicas=(3,), removing_replicas=(2,))
    assert build(moving, {1, 2, 3}) is None
    record = build(moving, {1, 2, 3}, isr=(1, 2, 3))
    assert record is not None
    assert (record.replicas, record.isr) == ((3, 1), (1, 3))
    assert (record.adding_replicas, record.removing_replicas) == ((), ())
    # Replica 2 leaves: the leader epoch is bumped though the leader stays.
    assert record.leader == 1


def test_completing_a_reassignment_moves_leadership_off_a_removed_replica() -> None:
    moving = partition((3, 1), (1,), 1, adding_replicas=(3,), removing_replicas=(1,))
    record = build(moving, {1, 3}, isr=(1, 3))
    assert record is not None and (record.replicas, record.isr, record.leader) == ((3,), (3,), 3)


def test_reassignment_replicas_keep_targets_first() -> None:
    ongoing = ReassignmentReplicas.between((1, 2, 3), (4, 3, 1))
    assert ongoing == ReassignmentReplicas((4, 3, 1, 2), (4,), (2,))
    assert ongoing.original() == (3, 1, 2)
    assert ongoing.completed((1, 2, 3)) is None
    assert ongoing.completed((1, 2, 3, 4)) == ((4, 3, 1), (1, 3, 4))
