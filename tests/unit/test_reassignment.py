"""Partition reassignment (KIP-455): start, completion through AlterPartition, cancel."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from krust.controller.image import MetadataImage
from krust.controller.reassignment import list_reassignments, plan_alter_reassignments
from krust.controller.records import FENCE, BrokerRegistrationChangeRecord
from krust.controller.replication import IsrMember, PartitionAlteration, plan_alter_partition

from .cluster_images import TOPIC_ID, cluster, part, partition, replay, with_topic


def never(topic: str) -> bool:
    return False


def reassign(
    image: MetadataImage, replicas: Any, index: int = 0, allow_change: bool = True
) -> tuple[MetadataImage, dict[str, Any]]:
    records, responses = plan_alter_reassignments(
        image, [("t", [(index, replicas)])], never, allow_change
    )
    return replay(image, records), responses[0]["partitions"][0]


def catch_up(image: MetadataImage, isr: tuple[int, ...]) -> MetadataImage:
    current = part(image)
    alteration = PartitionAlteration(
        0,
        current.leader_epoch,
        current.partition_epoch,
        tuple(IsrMember(b, -1) for b in isr),
    )
    plan = plan_alter_partition(image, current.leader, [(TOPIC_ID, [alteration])], never)
    return replay(image, plan.records)


def test_a_move_adds_the_targets_then_completes_when_they_are_in_sync() -> None:
    image = with_topic(cluster(brokers=(1, 2, 3, 4)), partition(0, (1, 2)))
    image, result = reassign(image, [3, 4])
    assert result["error_code"] == ErrorCode.none
    moving = part(image)
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == (
        (3, 4, 1, 2),
        (3, 4),
        (1, 2),
    )
    assert (moving.leader, moving.isr) == (1, (1, 2))
    assert list_reassignments(image, None) == [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": 0,
                    "replicas": (3, 4, 1, 2),
                    "adding_replicas": (3, 4),
                    "removing_replicas": (1, 2),
                }
            ],
        }
    ]
    image = catch_up(image, (1, 2, 3))
    assert part(image).reassigning  # 4 has not caught up yet
    image = catch_up(image, (1, 2, 3, 4))
    done = part(image)
    assert (done.replicas, done.isr, done.leader) == ((3, 4), (3, 4), 3)
    assert not done.reassigning and list_reassignments(image, None) == []


def test_shrinking_to_in_sync_replicas_completes_at_once() -> None:
    image = with_topic(cluster(), partition(0, (1, 2, 3)))
    image, _ = reassign(image, [1, 2])
    shrunk = part(image)
    assert (shrunk.replicas, shrunk.isr, shrunk.leader) == ((1, 2), (1, 2), 1)
    assert shrunk.leader_epoch == 1  # replica 3 must stop following


def test_a_cancel_restores_the_original_replicas() -> None:
    image = with_topic(cluster(brokers=(1, 2, 3, 4)), partition(0, (1, 2)))
    image, _ = reassign(image, [3, 4])
    image = catch_up(image, (1, 2, 3))
    image, result = reassign(image, None)
    assert result["error_code"] == ErrorCode.none
    reverted = part(image)
    assert (reverted.replicas, reverted.isr, reverted.reassigning) == ((1, 2), (1, 2), False)


def test_cancelling_without_a_reassignment_is_refused() -> None:
    image = with_topic(cluster(), partition(0, (1, 2)))
    _, result = reassign(image, None)
    assert result == {
        "partition_index": 0,
        "error_code": ErrorCode.no_reassignment_in_progress,
        "error_message": "No partition reassignment is in progress.",
    }


def test_bad_targets_are_refused() -> None:
    image = with_topic(cluster(), partition(0, (1, 2)))
    assert reassign(image, [1, 9])[1]["error_code"] == ErrorCode.invalid_replica_assignment
    assert reassign(image, [1, 1])[1]["error_code"] == ErrorCode.invalid_replica_assignment
    assert reassign(image, [])[1]["error_code"] == ErrorCode.invalid_replica_assignment
    unknown = reassign(image, [1], index=5)[1]
    assert unknown["error_code"] == ErrorCode.unknown_topic_or_partition
    changed = reassign(image, [1, 2, 3], allow_change=False)[1]
    assert changed["error_code"] == ErrorCode.invalid_replication_factor


def test_a_reassignment_onto_a_fenced_broker_waits_for_it() -> None:
    image = with_topic(cluster(), partition(0, (1,)))
    image = replay(
        image,
        [
            BrokerRegistrationChangeRecord(
                broker_id=3, broker_epoch=image.brokers[3].epoch, fenced=FENCE
            )
        ],
    )
    image, result = reassign(image, [3])
    assert result["error_code"] == ErrorCode.none
    assert (part(image).replicas, part(image).leader) == ((3, 1), 1)
