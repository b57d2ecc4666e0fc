"""Partition reassignment (KIP-455) as Kafka's controller runs it.

AlterPartitionReassignments starts one: the replica list becomes the targets plus the replicas
being removed, with the new ones as adding_replicas; nothing else moves until the new replicas
have caught up. When AlterPartition puts every target in the ISR, the PartitionChangeBuilder
completes it: replicas = targets, the removed ones leave the ISR, the leader moves if it was
one of them. Null replicas cancel: the added replicas go, the removed ones stay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from krust.controller.image import MetadataImage, PartitionImage, TopicImage
from krust.controller.partition_change import (
    Election,
    PartitionChangeBuilder,
    ReassignmentReplicas,
    reassignment_of,
)
from krust.controller.records import PartitionChangeRecord
from krust.controller.replication import is_active
from krust.controller.topics import TopicError, check_assigned_brokers

# (partition index, target replicas or None to cancel)
PartitionTarget = tuple[int, Sequence[int] | None]


def plan_alter_reassignments(
    image: MetadataImage,
    topics: Sequence[tuple[str, Sequence[PartitionTarget]]],
    unclean: Callable[[str], bool],
    allow_replication_factor_change: bool = True,
) -> tuple[list[PartitionChangeRecord], list[dict[str, Any]]]:
    """The records and per-topic results (response fields by name) of the request."""
    records = []
    responses = []
    for name, targets in topics:
        results = []
        for index, replicas in targets:
            try:
                record = _alter_one(
                    image, name, index, replicas, unclean, allow_replication_factor_change
                )
            except TopicError as error:
                results.append(
                    {
                        "partition_index": index,
                        "error_code": error.error,
                        "error_message": error.message,
                    }
                )
                continue
            if record is not None:
                records.append(record)
            results.append({"partition_index": index, "error_code": ErrorCode.none})
        responses.append({"name": name, "partitions": results})
    return records, responses


def _alter_one(
    image: MetadataImage,
    name: str,
    index: int,
    replicas: Sequence[int] | None,
    unclean: Callable[[str], bool],
    allow_replication_factor_change: bool,
) -> PartitionChangeRecord | None:
    topic = image.topics.get(name)
    if topic is None:
        raise TopicError(
            ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}."
        )
    partition = topic.partitions.get(index)
    if partition is None:
        raise TopicError(
            ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{index}."
        )
    if replicas is None:
        return _cancel(image, topic, partition, unclean)
    check_assigned_brokers(image, replicas)
    original = reassignment_of(partition).original()
    if not allow_replication_factor_change and len(replicas) != len(original):
        raise TopicError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {len(original)} to {len(replicas)}",
        )
    reassignment = ReassignmentReplicas.between(partition.replicas, replicas)
    builder = PartitionChangeBuilder(partition, topic.topic_id, lambda r: is_active(image, r))
    builder.target_replicas = reassignment.replicas
    builder.target_adding = reassignment.adding
    builder.target_removing = reassignment.removing
    return builder.build()


def _cancel(
    image: MetadataImage,
    topic: TopicImage,
    partition: PartitionImage,
    unclean: Callable[[str], bool],
) -> PartitionChangeRecord | None:
    """Back to the replicas before the reassignment (Kafka's PartitionReassignmentRevert)."""
    if not partition.reassigning:
        raise TopicError(
            ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."
        )
    ongoing = reassignment_of(partition)
    replicas = ongoing.original()
    isr = tuple(r for r in partition.isr if r not in ongoing.adding)
    unclean_topic = unclean(topic.name)
    if not isr:
        # Only added replicas are in sync: the first original one must lead without
        # their data, an unclean election the topic must allow.
        if not unclean_topic:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                f"Unable to revert partition assignment for {topic.name}:"
                f"{partition.partition} because it would require an unclean leader election.",
            )
        isr = replicas[:1]
    election = Election.UNCLEAN if unclean_topic else Election.ONLINE
    builder = PartitionChangeBuilder(
        partition, topic.topic_id, lambda r: is_active(image, r), election
    )
    builder.target_isr = isr
    builder.target_replicas = replicas
    builder.target_adding = builder.target_removing = ()
    return builder.build()


def list_reassignments(
    image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None
) -> list[dict[str, Any]]:
    """The ongoing reassignments of the named partitions, or of all when `topics` is None;
    topics without one are left out (Kafka's listPartitionReassignments)."""
    if topics is None:
        topics = [(name, sorted(t.partitions)) for name, t in sorted(image.topics.items())]
    listed = []
    for name, indexes in topics:
        topic = image.topics.get(name)
        if topic is None:
            continue
        ongoing = [
            {
                "partition_index": index,
                "replicas": partition.replicas,
                "adding_replicas": partition.adding_replicas,
                "removing_replicas": partition.removing_replicas,
            }
            for index in indexes
            if (partition := topic.partitions.get(index)) is not None and partition.reassigning
        ]
        if ongoing:
            listed.append({"name": name, "partitions": ongoing})
    return listed
