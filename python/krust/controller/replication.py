"""Leaders and ISRs decided the way Kafka's ReplicationControlManager decides them: after a
broker is fenced, unfenced or shuts down, on a leader's AlterPartition (KIP-497), and on
ElectLeaders (KIP-460). Pure planning over a MetadataImage: results and PartitionChangeRecords.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from krust.controller.image import (
    MetadataImage,
    PartitionImage,
    TopicImage,
    merge_partition_change,
)
from krust.controller.partition_change import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChangeBuilder,
)
from krust.controller.records import NO_LEADER_CHANGE, PartitionChangeRecord
from krust.controller.topic_configs import TOPIC_CONFIG_KEYS

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
PREFERRED_ELECTION = 0  # ElectLeaders' election types (Kafka's ElectionType)
UNCLEAN_ELECTION = 1

TopicPartition = tuple[TopicImage, PartitionImage]


def unclean_election_enabled(
    image: MetadataImage, broker_config: Mapping[str, Any], topic: str
) -> bool:
    """unclean.leader.election.enable of a topic: its own config, else the broker's (dynamic
    per-broker, cluster default, static; Kafka's uncleanLeaderElectionEnabledForTopic)."""
    topic_image = image.topics.get(topic)
    override = topic_image.configs.get(UNCLEAN_LEADER_ELECTION) if topic_image else None
    if override is not None:
        return bool(TOPIC_CONFIG_KEYS[UNCLEAN_LEADER_ELECTION].parse(override))
    return bool(broker_config[UNCLEAN_LEADER_ELECTION])


def is_active(image: MetadataImage, broker: int) -> bool:
    registration = image.brokers.get(broker)
    return registration is not None and registration.active


def partitions(image: MetadataImage) -> Iterator[TopicPartition]:
    for topic in image.topics.values():
        for partition in topic.partitions.values():
            yield topic, partition


def leads_any(image: MetadataImage, broker: int) -> bool:
    """Whether `broker` leads a partition (Kafka's BrokersToIsrs.hasLeaderships)."""
    return any(p.leader == broker for _, p in partitions(image))


def leader_and_isr_updates(
    image: MetadataImage,
    changing: Iterable[TopicPartition],
    unclean: Callable[[str], bool],
    remove: int = NO_LEADER,
    add: int = NO_LEADER,
) -> list[PartitionChangeRecord]:
    """Take `remove` out of the ISRs and leadership of `changing`, and/or let `add` lead
    (though the image does not show it active yet), electing leaders where needed (Kafka's
    generateLeaderAndIsrUpdates). An ISR never becomes empty: its last member stays."""

    def acceptable(replica: int) -> bool:
        return replica != remove and (replica == add or is_active(image, replica))

    records = []
    for topic, partition in changing:
        election = Election.UNCLEAN if unclean(topic.name) else Election.ONLINE
        builder = PartitionChangeBuilder(partition, topic.topic_id, acceptable, election)
        builder.target_isr = tuple(r for r in partition.isr if r != remove)
        record = builder.build()
        if record is not None:
            records.append(record)
    return records


def fence_broker_updates(
    image: MetadataImage, broker: int, unclean: Callable[[str], bool]
) -> list[PartitionChangeRecord]:
    """A fenced (or shutting down) broker leaves every ISR and leadership."""
    in_isr = ((t, p) for t, p in partitions(image) if broker in p.isr)
    return leader_and_isr_updates(image, in_isr, unclean, remove=broker)


def unfence_broker_updates(
    image: MetadataImage, broker: int, unclean: Callable[[str], bool]
) -> list[PartitionChangeRecord]:
    """An unfenced broker may lead the partitions that have no leader."""
    leaderless = ((t, p) for t, p in partitions(image) if p.leader == NO_LEADER)
    return leader_and_isr_updates(image, leaderless, unclean, add=broker)


@dataclass(frozen=True)
class IsrMember:
    broker_id: int
    broker_epoch: int  # -1: not checked (AlterPartition v2 sends ids only)


@dataclass(frozen=True)
class PartitionAlteration:
    """One partition of an AlterPartition request."""

    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[IsrMember, ...]
    leader_recovery_state: int = RECOVERED


@dataclass
class Plan:
    """Results (response fields by name) and the records to append."""

    results: list[dict[str, Any]] = field(default_factory=list)
    records: list[PartitionChangeRecord] = field(default_factory=list)


def plan_alter_partition(
    image: MetadataImage,
    broker_id: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[PartitionAlteration]]],
    unclean: Callable[[str], bool],
) -> Plan:
    """A leader's new ISRs (Kafka's ReplicationControlManager.alterPartition, versions 2+,
    after the caller checked the broker epoch): per topic id its partitions' results."""
    plan = Plan()
    for topic_id, alterations in topics:
        topic = image.topics_by_id.get(topic_id)
        results = []
        for alteration in alterations:
            if topic is None:
                results.append(_partition_error(alteration.partition, ErrorCode.unknown_topic_id))
                continue
            results.append(_alter_one(image, broker_id, topic, alteration, unclean, plan))
        plan.results.append({"topic_id": topic_id, "partitions": results})
    return plan


def _partition_error(partition: int, error: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": error,
        "leader_id": 0,
        "leader_epoch": 0,
        "partition_epoch": 0,
    }


def _alter_one(
    image: MetadataImage,
    broker_id: int,
    topic: TopicImage,
    alteration: PartitionAlteration,
    unclean: Callable[[str], bool],
    plan: Plan,
) -> dict[str, Any]:
    partition = topic.partitions.get(alteration.partition)
    error = _alter_partition_problem(image, broker_id, partition, alteration)
    if error is not None or partition is None:
        return _partition_error(alteration.partition, error or ErrorCode.unknown_topic_or_partition)
    election = Election.UNCLEAN if unclean(topic.name) else Election.ONLINE
    builder = PartitionChangeBuilder(
        partition, topic.topic_id, lambda r: is_active(image, r), election
    )
    builder.target_isr = tuple(member.broker_id for member in alteration.new_isr)
    builder.target_leader_recovery_state = alteration.leader_recovery_state
    record = builder.build()
    if record is not None:
        plan.records.append(record)
        partition = merge_partition_change(partition, record)
        if record.leader not in (broker_id, NO_LEADER_CHANGE):
            # Completing a reassignment moved the leadership away: the old leader must
            # learn the new state from the metadata before it tries again.
            return _partition_error(alteration.partition, ErrorCode.new_leader_elected)
    return {
        "partition_index": alteration.partition,
        "error_code": ErrorCode.none,
        "leader_id": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "isr": partition.isr,
        "leader_recovery_state": partition.leader_recovery_state,
        "partition_epoch": partition.partition_epoch,
    }


def _alter_partition_problem(
    image: MetadataImage,
    broker_id: int,
    partition: PartitionImage | None,
    alteration: PartitionAlteration,
) -> ErrorCode | None:
    """Why the alteration is refused, in Kafka's order of checks, or None."""
    if partition is None:
        return ErrorCode.unknown_topic_or_partition
    if (
        alteration.leader_epoch > partition.leader_epoch
        or alteration.partition_epoch > partition.partition_epoch
    ):
        # The leader knows newer state than this controller: it is likely no longer active.
        return ErrorCode.not_controller
    if alteration.leader_epoch < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if broker_id != partition.leader:
        return ErrorCode.invalid_request
    if alteration.partition_epoch < partition.partition_epoch:
        return ErrorCode.invalid_update_version
    new_isr = [member.broker_id for member in alteration.new_isr]
    if (
        len(set(new_isr)) != len(new_isr)
        or not set(new_isr) <= set(partition.replicas)
        or partition.leader not in new_isr
    ):
        return ErrorCode.invalid_request
    if alteration.leader_recovery_state == RECOVERING and len(new_isr) > 1:
        return ErrorCode.invalid_request
    if (
        partition.leader_recovery_state == RECOVERED
        and alteration.leader_recovery_state == RECOVERING
    ):
        return ErrorCode.invalid_request
    for member in alteration.new_isr:
        broker = image.brokers.get(member.broker_id)
        if broker is None or not broker.active or member.broker_epoch not in (-1, broker.epoch):
            return ErrorCode.ineligible_replica
    return None


def plan_balance_leaders(image: MetadataImage, limit: int) -> list[PartitionChangeRecord]:
    """Preferred leader elections for at most `limit` partitions not led by their preferred
    replica, where it can lead (Kafka's maybeBalancePartitionLeaders, the work of
    auto.leader.rebalance.enable)."""
    records: list[PartitionChangeRecord] = []
    for topic, partition in partitions(image):
        if len(records) >= limit:
            break
        if partition.leader == partition.replicas[0]:
            continue
        builder = PartitionChangeBuilder(
            partition, topic.topic_id, lambda r: is_active(image, r), Election.PREFERRED
        )
        record = builder.build()
        if record is not None:
            records.append(record)
    return records


def plan_elect_leaders(
    image: MetadataImage,
    election_type: int,
    requested: Sequence[tuple[str, Sequence[int]]] | None,
) -> tuple[list[PartitionChangeRecord], list[dict[str, Any]]]:
    """ElectLeaders (Kafka's ReplicationControlManager.electLeaders): the records and the
    per-topic results; `requested` None means every partition, then partitions whose leader
    is already the wanted one are left out of the results."""
    records: list[PartitionChangeRecord] = []
    results = []
    if requested is None:
        requested = [(name, sorted(topic.partitions)) for name, topic in image.topics.items()]
        skip_not_needed = True
    else:
        skip_not_needed = False
    for name, indexes in requested:
        partition_results = []
        for index in indexes:
            error, message = _elect_one(image, election_type, name, index, records)
            if skip_not_needed and error == ErrorCode.election_not_needed:
                continue
            partition_results.append(
                {"partition_id": index, "error_code": error, "error_message": message}
            )
        results.append({"topic": name, "partition_result": partition_results})
    return records, results


def _elect_one(
    image: MetadataImage,
    election_type: int,
    name: str,
    index: int,
    records: list[PartitionChangeRecord],
) -> tuple[ErrorCode, str | None]:
    topic = image.topics.get(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {name}"
    partition = topic.partitions.get(index)
    if partition is None:
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {name}-{index}"
    preferred = election_type == PREFERRED_ELECTION
    if (preferred and partition.leader == partition.replicas[0]) or (
        not preferred and partition.leader != NO_LEADER
    ):
        return ErrorCode.election_not_needed, "Leader election not needed for topic partition."
    election = Election.PREFERRED if preferred else Election.UNCLEAN
    builder = PartitionChangeBuilder(
        partition, topic.topic_id, lambda r: is_active(image, r), election
    )
    record = builder.build()
    if record is None:
        if preferred:
            return (
                ErrorCode.preferred_leader_not_available,
                "The preferred leader was not available.",
            )
        return (
            ErrorCode.eligible_leaders_not_available,
            "Eligible topic partition leaders are not available.",
        )
    records.append(record)
    return ErrorCode.none, None
