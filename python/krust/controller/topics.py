"""Topic operations decided the way Kafka's controller decides them (ReplicationControlManager):
CreateTopics, DeleteTopics and CreatePartitions turned into per-topic results (response
fields by name) and the metadata records that carry them out."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from krust.controller.image import MetadataImage, TopicImage
from krust.controller.meta_properties import random_kafka_uuid
from krust.controller.placement import PlacementError, place_replicas
from krust.controller.records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from krust.controller.topic_configs import (
    TopicConfigError,
    effective_topic_configs,
    validate_topic_configs,
)

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one operation, one bounded batch.
MAX_RECORDS_PER_USER_OP = 10_000
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
ZERO_UUID = uuid.UUID(int=0)


class TopicError(Exception):
    """One topic's failure: a Kafka error code and message."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create, as CreateTopics (or `Controller.ensure_topic`) asks for it."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partition, replicas)
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class PartitionsSpec:
    """A CreatePartitions entry: the new total count, optionally the new partitions' replicas."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass
class Plan:
    """Per-topic results (response fields by name) and the records to append."""

    results: list[dict[str, Any]] = field(default_factory=list)
    records: list[MetadataRecord] = field(default_factory=list)

    def fail(self, name: str | None, error: ErrorCode, message: str | None, **extra: Any) -> None:
        self.results.append({"name": name, "error_code": error, "error_message": message, **extra})


def topic_name_problem(name: str) -> str | None:
    """Why a topic name is illegal (Kafka's Topic.validate), or None."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length 249"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f"'{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def _collision_key(name: str) -> str:
    # '.' and '_' collide in metric names, so Kafka refuses topics differing only there.
    return name.replace(".", "_")


def plan_create_topics(
    image: MetadataImage,
    config: Mapping[str, Any],
    specs: Sequence[TopicSpec],
    new_topic_id: Callable[[], uuid.UUID] = random_kafka_uuid,
) -> Plan:
    plan = Plan()
    counts = Counter(spec.name for spec in specs)
    taken = {_collision_key(name): name for name in image.topics}
    reported: set[str] = set()
    for spec in specs:
        if spec.name in reported:
            continue
        reported.add(spec.name)
        if counts[spec.name] > 1:
            plan.fail(spec.name, ErrorCode.invalid_request, "Duplicate topic name.")
            continue
        budget = MAX_RECORDS_PER_USER_OP - len(plan.records)
        try:
            records, result = _create_topic(image, config, spec, taken, new_topic_id(), budget)
        except TopicError as error:
            plan.fail(spec.name, error.error, error.message)
            continue
        taken[_collision_key(spec.name)] = spec.name
        plan.records.extend(records)
        plan.results.append(result)
    return plan


def _create_topic(
    image: MetadataImage,
    config: Mapping[str, Any],
    spec: TopicSpec,
    taken: Mapping[str, str],
    topic_id: uuid.UUID,
    budget: int,
) -> tuple[list[MetadataRecord], dict[str, Any]]:
    problem = topic_name_problem(spec.name)
    if problem:
        raise TopicError(ErrorCode.invalid_topic_exception, f"Topic name is invalid: {problem}")
    colliding = taken.get(_collision_key(spec.name))
    if colliding is not None and colliding != spec.name:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic '{spec.name}' collides with existing topic: {colliding}",
        )
    if spec.name in image.topics:
        raise TopicError(ErrorCode.topic_already_exists, f"Topic '{spec.name}' already exists.")
    requested = dict(spec.configs)
    try:
        validate_topic_configs(requested, config)
    except TopicConfigError as error:
        raise TopicError(ErrorCode.invalid_config, str(error)) from None
    overrides = {name: value for name, value in requested.items() if value is not None}
    replicas = _new_topic_replicas(image, config, spec, budget - 1 - len(overrides))

    records: list[MetadataRecord] = [TopicRecord(name=spec.name, topic_id=topic_id)]
    records += [
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=spec.name, name=n, value=v)
        for n, v in sorted(overrides.items())
    ]
    records += _partition_records(image, topic_id, 0, replicas)
    result = {
        "name": spec.name,
        "topic_id": topic_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": len(replicas),
        "replication_factor": len(replicas[0]),
        "configs": [
            {"name": c.name, "value": c.value, "config_source": c.source}
            for c in effective_topic_configs(overrides, config)
        ],
    }
    return records, result


def _new_topic_replicas(
    image: MetadataImage, config: Mapping[str, Any], spec: TopicSpec, budget: int
) -> list[tuple[int, ...]]:
    """The replicas of each partition of a new topic, in partition order."""
    if spec.assignments:
        if spec.replication_factor != -1:
            raise TopicError(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not "
                "set to -1.",
            )
        if spec.num_partitions != -1:
            raise TopicError(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        _check_budget(len(spec.assignments), budget)
        by_partition: dict[int, tuple[int, ...]] = {}
        for partition, brokers in spec.assignments:
            if partition in by_partition:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {partition}",
                )
            previous = len(next(iter(by_partition.values()))) if by_partition else None
            _check_manual_assignment(image, partition, brokers, previous)
            by_partition[partition] = brokers
        if sorted(by_partition) != list(range(len(by_partition))):
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return [by_partition[p] for p in range(len(by_partition))]
    if spec.replication_factor < -1 or spec.replication_factor == 0:
        raise TopicError(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if spec.num_partitions < -1 or spec.num_partitions == 0:
        raise TopicError(
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        )
    count = config["num.partitions"] if spec.num_partitions == -1 else spec.num_partitions
    factor = (
        config["default.replication.factor"]
        if spec.replication_factor == -1
        else spec.replication_factor
    )
    _check_budget(count, budget)
    return place_new_replicas(image, count, factor)


def _check_budget(partitions: int, budget: int) -> None:
    if partitions > budget:
        raise TopicError(
            ErrorCode.policy_violation, "Unable to perform excessively large batch operation."
        )


def place_new_replicas(
    image: MetadataImage, count: int, replication_factor: int
) -> list[tuple[int, ...]]:
    """Replicas of `count` new partitions over the active brokers (controller.placement)."""
    racks = {b: image.brokers[b].rack for b in image.active_brokers}
    try:
        return place_replicas(racks, count, replication_factor)
    except PlacementError as error:
        raise TopicError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): {error}",
        ) from None


def check_assigned_brokers(image: MetadataImage, brokers: Sequence[int]) -> None:
    """A manual assignment (or reassignment) names registered brokers, each once: else
    INVALID_REPLICA_ASSIGNMENT with Kafka's message."""

    def invalid(message: str) -> TopicError:
        return TopicError(ErrorCode.invalid_replica_assignment, message)

    if not brokers:
        raise invalid("The manual partition assignment includes an empty replica list.")
    for broker, times in sorted(Counter(brokers).items()):
        if broker not in image.brokers:
            raise invalid(
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered."
            )
        if times > 1:
            raise invalid(
                f"The manual partition assignment includes the broker {broker} more than once."
            )


def _check_manual_assignment(
    image: MetadataImage, partition: int, brokers: Sequence[int], replication_factor: int | None
) -> None:
    def invalid(message: str) -> TopicError:
        return TopicError(ErrorCode.invalid_replica_assignment, message)

    check_assigned_brokers(image, brokers)
    if replication_factor is not None and len(brokers) != replication_factor:
        raise invalid(
            f"The manual partition assignment includes a partition with {len(brokers)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )
    if not set(brokers) & set(image.active_brokers):
        raise invalid(
            f"All brokers specified in the manual partition assignment for partition "
            f"{partition} are fenced or in controlled shutdown."
        )


def _partition_records(
    image: MetadataImage, topic_id: uuid.UUID, first: int, replicas: Sequence[tuple[int, ...]]
) -> list[PartitionRecord]:
    active = set(image.active_brokers)
    records = []
    for index, brokers in enumerate(replicas, start=first):
        isr = tuple(b for b in brokers if b in active)
        records.append(
            PartitionRecord(
                partition_id=index,
                topic_id=topic_id,
                replicas=brokers,
                isr=isr,
                leader=isr[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    return records


def plan_delete_topics(
    image: MetadataImage,
    config: Mapping[str, Any],
    version: int,
    entries: Sequence[tuple[str | None, uuid.UUID | None]],
) -> Plan:
    """DeleteTopics; `entries` are (name, id) pairs (v1-5 send names only, v6 either)."""
    plan = Plan()
    entries = [(name, None if topic_id == ZERO_UUID else topic_id) for name, topic_id in entries]
    if not config["delete.topic.enable"]:
        error = ErrorCode.topic_deletion_disabled if version >= 3 else ErrorCode.invalid_request
        for name, topic_id in entries:
            plan.fail(name, error, "Topic deletion is disabled.", topic_id=topic_id or ZERO_UUID)
        return plan
    name_counts = Counter(name for name, topic_id in entries if topic_id is None)
    id_counts = Counter(topic_id for name, topic_id in entries if name is None)
    reported: set[str | uuid.UUID] = set()
    removed: set[uuid.UUID] = set()
    for name, topic_id in entries:
        key = name if topic_id is None else topic_id
        if key is not None and key in reported:
            continue
        reported.add(key)  # type: ignore[arg-type]
        try:
            topic = _topic_to_delete(image, name, topic_id, name_counts, id_counts)
            if topic.topic_id in removed:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
        except TopicError as error:
            plan.fail(name, error.error, error.message, topic_id=topic_id or ZERO_UUID)
            continue
        removed.add(topic.topic_id)
        plan.records.append(RemoveTopicRecord(topic_id=topic.topic_id))
        plan.results.append(
            {"name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.none}
        )
    return plan


def _topic_to_delete(
    image: MetadataImage,
    name: str | None,
    topic_id: uuid.UUID | None,
    name_counts: Counter[str | None],
    id_counts: Counter[uuid.UUID | None],
) -> TopicImage:
    if name is None and topic_id is None:
        raise TopicError(ErrorCode.invalid_request, "Neither topic name nor id were specified.")
    if name is not None and topic_id is not None:
        raise TopicError(
            ErrorCode.invalid_request, "You may not specify both topic name and topic id."
        )
    if name is not None:
        if name_counts[name] > 1:
            raise TopicError(ErrorCode.invalid_request, "Duplicate topic name.")
        topic = image.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
    else:
        if id_counts[topic_id] > 1:
            raise TopicError(ErrorCode.invalid_request, "Duplicate topic id.")
        topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
    if topic.internal:
        raise TopicError(
            ErrorCode.invalid_topic_exception, f"Cannot delete internal topic {topic.name}."
        )
    return topic


def plan_create_partitions(image: MetadataImage, specs: Sequence[PartitionsSpec]) -> Plan:
    plan = Plan()
    counts = Counter(spec.name for spec in specs)
    reported: set[str] = set()
    for spec in specs:
        if spec.name in reported:
            continue
        reported.add(spec.name)
        try:
            if counts[spec.name] > 1:
                raise TopicError(ErrorCode.invalid_request, "Duplicate topic name.")
            budget = MAX_RECORDS_PER_USER_OP - len(plan.records)
            plan.records += _new_partitions(image, spec, budget)
        except TopicError as error:
            plan.fail(spec.name, error.error, error.message)
            continue
        plan.results.append({"name": spec.name, "error_code": ErrorCode.none})
    return plan


def _new_partitions(
    image: MetadataImage, spec: PartitionsSpec, budget: int
) -> list[PartitionRecord]:
    topic = image.topics.get(spec.name)
    if topic is None:
        raise TopicError(
            ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        )
    current = len(topic.partitions)
    if spec.count == current:
        raise TopicError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if spec.count < current:
        raise TopicError(
            ErrorCode.invalid_partitions,
            f"The topic {spec.name} currently has {current} partition(s); {spec.count} would "
            "not be an increase.",
        )
    additional = spec.count - current
    if spec.assignments is not None and len(spec.assignments) != additional:
        raise TopicError(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(spec.assignments)} assignment(s) were specified.",
        )
    _check_budget(additional, budget)
    factor = len(topic.partitions[min(topic.partitions)].replicas)
    if spec.assignments is None:
        replicas = place_new_replicas(image, additional, factor)
    else:
        for index, brokers in enumerate(spec.assignments, start=current):
            _check_manual_assignment(image, index, brokers, factor)
        replicas = list(spec.assignments)
    return _partition_records(image, topic.topic_id, current, replicas)
