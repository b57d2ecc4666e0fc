"""The metadata image: what the metadata log's records add up to, and how records replay into it.

Images are immutable; `ImageBuilder` replays records on top of one and builds the next, the
way Kafka's MetadataDelta turns one MetadataImage into the next. It also knows what changed,
so the core gets only that (`core_delta`), never the whole image per change.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from krust.controller.client_quotas import ClientQuotas, QuotaEntity, replay_client_quota
from krust.controller.features import SUPPORTED_FEATURES
from krust.controller.records import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    FENCE,
    GROUP_RESOURCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    MetadataRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

if TYPE_CHECKING:
    from krust import _core
    from krust.plugins.authorizer import AclBinding

# (user, mechanism, salt, stored key, server key, iterations) of a SCRAM credential.
CoreCredential = tuple[str, int, bytes, bytes, bytes, int]
# Kafka's Topic.INTERNAL_TOPICS: reported with is_internal in Metadata responses.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True)
class BrokerImage:
    node_id: int
    host: str
    port: int
    rack: str | None
    epoch: int = -1
    fenced: bool = False
    in_controlled_shutdown: bool = False
    # The record that registered it, with its current fencing and controlled shutdown state:
    # written again into snapshots.
    registration: RegisterBrokerRecord | None = None
    # Where that record was read (a snapshot's records count as read at its end): Kafka's
    # registerBrokerRecordOffset, which a broker's metadata must reach before it is unfenced.
    # Not part of the image's content, so replaying a snapshot gives an equal image.
    registration_offset: int = field(default=-1, compare=False)

    @property
    def active(self) -> bool:
        """Unfenced and not in controlled shutdown: may lead, join an ISR, get new replicas
        (Kafka's ClusterControlManager.isActive)."""
        return not self.fenced and not self.in_controlled_shutdown

    def address_for(self, listener: str) -> tuple[str, int]:
        """Its address on `listener` (what a client of that listener is told, as Kafka does);
        the first listener's when it has no such listener."""
        for endpoint in self.registration.end_points if self.registration else ():
            if endpoint.name == listener:
                return endpoint.host, endpoint.port
        return self.host, self.port


@dataclass(frozen=True)
class PartitionImage:
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # An ongoing reassignment (KIP-455): replicas being added to and removed from `replicas`.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # 1 (RECOVERING) after an unclean leader election until the leader says it recovered (KIP-704).
    leader_recovery_state: int = 0

    @property
    def reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    internal: bool
    configs: Mapping[str, str]
    partitions: Mapping[int, PartitionImage]


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    node_id: int
    # What Metadata and DescribeCluster answer as the controller: this node, as a KRaft broker
    # answers an alive broker, since clients cannot reach the quorum and admin requests sent
    # to any broker are forwarded to the active controller.
    controller_id: int
    metadata_offset: int
    brokers: Mapping[int, BrokerImage]
    topics: Mapping[str, TopicImage]
    features: Mapping[str, int] = field(default_factory=lambda: EMPTY)
    next_producer_id: int = 0
    # Dynamic broker configs by resource name: a broker id, or "" for the cluster-wide default.
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    # Dynamic group configs (kafka-configs --entity-type groups) by group id.
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    # Client metrics subscriptions (KIP-714, kafka-client-metrics) by subscription name.
    client_metrics: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    # ACLs by id (AccessControlEntryRecords), for the built-in authorizer.
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: EMPTY)
    client_quotas: ClientQuotas = field(default_factory=lambda: EMPTY)
    # SCRAM credentials by (user, mechanism type), as their records wrote them (KIP-554).
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=lambda: EMPTY
    )

    @cached_property
    def topics_by_id(self) -> Mapping[uuid.UUID, TopicImage]:
        return MappingProxyType({topic.topic_id: topic for topic in self.topics.values()})

    @cached_property
    def live_brokers(self) -> tuple[int, ...]:
        """Ids of the registered, unfenced brokers, in id order."""
        return tuple(sorted(b.node_id for b in self.brokers.values() if not b.fenced))

    @cached_property
    def active_brokers(self) -> tuple[int, ...]:
        """Ids of the brokers that may take new replicas and lead: unfenced and not in
        controlled shutdown, in id order."""
        return tuple(sorted(b.node_id for b in self.brokers.values() if b.active))

    @staticmethod
    def empty(cluster_id: str, node_id: int) -> MetadataImage:
        return MetadataImage(cluster_id, node_id, node_id, -1, EMPTY, EMPTY)


@dataclass
class _TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage]


class ImageBuilder:
    """Replays records on top of an image; `build()` returns the resulting image."""

    def __init__(
        self,
        image: MetadataImage,
        internal_topics: Set[str] = frozenset(),
        transaction: list[tuple[int, MetadataRecord]] | None = None,
    ) -> None:
        self._base = image
        self._internal_topics = INTERNAL_TOPICS | internal_topics
        self._offset = image.metadata_offset
        self._brokers = dict(image.brokers)
        self._features = dict(image.features)
        self._next_producer_id = image.next_producer_id
        self._topics: dict[uuid.UUID, TopicImage | _TopicState] = dict(image.topics_by_id)
        self._ids_by_name = {topic.name: topic.topic_id for topic in image.topics.values()}
        self._configs = {topic.name: dict(topic.configs) for topic in image.topics.values()}
        self._broker_configs = {name: dict(c) for name, c in image.broker_configs.items()}
        self._group_configs = {name: dict(c) for name, c in image.group_configs.items()}
        self._client_metrics = {name: dict(c) for name, c in image.client_metrics.items()}
        self.broker_configs_changed = False
        self._acls = dict(image.acls)
        self.acls_changed = False
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {
            entity: dict(values) for entity, values in image.client_quotas.items()
        }
        self.client_quotas_changed = False
        self._scram = dict(image.scram_credentials)
        self.scram_credentials_changed = False
        # What changed, for `core_delta`.
        self._changed_partitions: dict[uuid.UUID, set[int]] = {}
        self._changed_topic_names: set[str] = set()
        self._deleted_topic_ids: set[uuid.UUID] = set()
        self._brokers_changed = False
        self._features_changed = False
        # The records of an open metadata transaction (KIP-868), applied at its end; it may
        # have begun in an earlier builder's records.
        self._transaction = transaction

    @property
    def in_transaction(self) -> bool:
        """Whether a BeginTransactionRecord was replayed and its end or abort not yet."""
        return self._transaction is not None

    @property
    def transaction(self) -> list[tuple[int, MetadataRecord]] | None:
        """The records of the open transaction, for the builder of the next records."""
        return self._transaction

    def replay_all(self, records: Iterable[tuple[int, MetadataRecord]]) -> ImageBuilder:
        for offset, record in records:
            self.replay(offset, record)
        return self

    def replay(self, offset: int, record: MetadataRecord) -> None:
        """Apply one record at `offset`; MetadataRecordError if it contradicts the image.
        Inside a metadata transaction records wait for its end (and vanish if it aborts)."""
        match record:
            case BeginTransactionRecord():
                if self._transaction is not None:
                    raise MetadataRecordError("BeginTransactionRecord inside a transaction")
                self._transaction = []
            case EndTransactionRecord() | AbortTransactionRecord():
                pending = self._transaction
                if pending is None:
                    raise MetadataRecordError(f"{type(record).__name__} outside a transaction")
                self._transaction = None
                if isinstance(record, EndTransactionRecord):
                    for pending_offset, pending_record in pending:
                        self._apply(pending_offset, pending_record)
            case _ if self._transaction is not None:
                self._transaction.append((offset, record))
                return
            case _:
                self._apply(offset, record)
        self._offset = offset

    def _apply(self, offset: int, record: MetadataRecord) -> None:
        match record:
            case RegisterBrokerRecord():
                self._register_broker(offset, record)
                self._brokers_changed = True
            case BrokerRegistrationChangeRecord():
                self._change_broker(record)
                self._brokers_changed = True
            case UnregisterBrokerRecord():
                self._broker(record.broker_id, record.broker_epoch, record)
                del self._brokers[record.broker_id]
                self._brokers_changed = True
            case TopicRecord():
                if record.name in self._ids_by_name or record.topic_id in self._topics:
                    raise MetadataRecordError(f"duplicate TopicRecord for {record.name}")
                self._topics[record.topic_id] = _TopicState(record.name, record.topic_id, {})
                self._ids_by_name[record.name] = record.topic_id
                self._changed_topic_names.add(record.name)
            case PartitionRecord():
                self._changed_partitions.setdefault(record.topic_id, set()).add(record.partition_id)
                self._topic_state(record.topic_id).partitions[record.partition_id] = PartitionImage(
                    partition=record.partition_id,
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    replicas=tuple(record.replicas),
                    isr=tuple(record.isr),
                    removing_replicas=tuple(record.removing_replicas),
                    adding_replicas=tuple(record.adding_replicas),
                    leader_recovery_state=record.leader_recovery_state,
                )
            case PartitionChangeRecord():
                self._change_partition(record)
                self._changed_partitions.setdefault(record.topic_id, set()).add(record.partition_id)
            case ConfigRecord():
                self._set_config(record)
            case RemoveTopicRecord():
                removed = self._topics.pop(record.topic_id, None)
                if removed is None:
                    raise MetadataRecordError(f"RemoveTopicRecord for unknown {record.topic_id}")
                del self._ids_by_name[removed.name]
                self._configs.pop(removed.name, None)
                self._changed_partitions.pop(record.topic_id, None)
                before = self._base.topics.get(removed.name)
                if before is not None and before.topic_id == record.topic_id:
                    self._deleted_topic_ids.add(record.topic_id)
            case FeatureLevelRecord():
                self._features_changed = True
                if record.feature_level == 0:
                    self._features.pop(record.name, None)
                else:
                    self._features[record.name] = record.feature_level
            case ProducerIdsRecord():
                self._next_producer_id = record.next_producer_id
            case AccessControlEntryRecord():
                self._acls[record.id] = acl_binding(record)
                self.acls_changed = True
            case RemoveAccessControlEntryRecord():
                if self._acls.pop(record.id, None) is None:
                    raise MetadataRecordError(
                        f"RemoveAccessControlEntryRecord for unknown {record.id}"
                    )
                self.acls_changed = True
            case ClientQuotaRecord():
                replay_client_quota(self._client_quotas, record)
                self.client_quotas_changed = True
            case UserScramCredentialRecord():
                self._scram[(record.name, record.mechanism)] = record
                self.scram_credentials_changed = True
            case RemoveUserScramCredentialRecord():
                self._scram.pop((record.name, record.mechanism), None)
                self.scram_credentials_changed = True
            case NoOpRecord():
                pass

    def build(self) -> MetadataImage:
        topics = {}
        for topic_id, topic in self._topics.items():
            name = topic.name
            internal = name in self._internal_topics
            if isinstance(topic, TopicImage):
                if topic.internal == internal and name not in self._changed_topic_names:
                    topics[name] = topic
                    continue
                if topic.internal != internal:
                    self._changed_topic_names.add(name)
            partitions = (
                MappingProxyType(dict(topic.partitions))
                if isinstance(topic, _TopicState)
                else topic.partitions
            )
            topics[name] = TopicImage(
                name=name,
                topic_id=topic_id,
                internal=internal,
                configs=MappingProxyType(dict(self._configs.get(name, {}))),
                partitions=partitions,
            )
        return replace(
            self._base,
            metadata_offset=self._offset,
            brokers=MappingProxyType(dict(self._brokers)),
            topics=MappingProxyType(topics),
            features=MappingProxyType(dict(self._features)),
            next_producer_id=self._next_producer_id,
            broker_configs=MappingProxyType(
                {name: MappingProxyType(dict(c)) for name, c in self._broker_configs.items() if c}
            ),
            group_configs=MappingProxyType(
                {name: MappingProxyType(dict(c)) for name, c in self._group_configs.items() if c}
            ),
            client_metrics=MappingProxyType(
                {name: MappingProxyType(dict(c)) for name, c in self._client_metrics.items() if c}
            ),
            acls=MappingProxyType(dict(self._acls)) if self.acls_changed else self._base.acls,
            client_quotas=MappingProxyType(
                {e: MappingProxyType(dict(v)) for e, v in self._client_quotas.items()}
            ),
            scram_credentials=MappingProxyType(dict(self._scram)),
        )

    def _register_broker(self, offset: int, record: RegisterBrokerRecord) -> None:
        # The image keeps one address per broker: the first advertised listener.
        endpoint = record.end_points[0] if record.end_points else None
        self._brokers[record.broker_id] = BrokerImage(
            node_id=record.broker_id,
            host=endpoint.host if endpoint else "",
            port=endpoint.port if endpoint else -1,
            rack=record.rack,
            epoch=record.broker_epoch,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            registration=record,
            registration_offset=offset,
        )

    def _broker(self, broker_id: int, epoch: int, record: MetadataRecord) -> BrokerImage:
        """The registered broker a record names, with the epoch it names (as Kafka checks)."""
        broker = self._brokers.get(broker_id)
        if broker is None:
            raise MetadataRecordError(
                f"{type(record).__name__} for unregistered broker {broker_id}"
            )
        if broker.epoch != epoch:
            raise MetadataRecordError(
                f"{type(record).__name__} for broker {broker_id} with epoch {epoch}, "
                f"registered with epoch {broker.epoch}"
            )
        return broker

    def _change_broker(self, record: BrokerRegistrationChangeRecord) -> None:
        broker = self._broker(record.broker_id, record.broker_epoch, record)
        fenced = broker.fenced if record.fenced == 0 else record.fenced == FENCE
        shutting_down = broker.in_controlled_shutdown or (
            record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN
        )
        registration = broker.registration
        if registration is not None:
            registration = replace(
                registration, fenced=fenced, in_controlled_shutdown=shutting_down
            )
        self._brokers[record.broker_id] = replace(
            broker,
            fenced=fenced,
            in_controlled_shutdown=shutting_down,
            registration=registration,
        )

    def _topic_state(self, topic_id: uuid.UUID) -> _TopicState:
        topic = self._topics.get(topic_id)
        if topic is None:
            raise MetadataRecordError(f"partition record for unknown topic {topic_id}")
        if isinstance(topic, TopicImage):
            topic = _TopicState(topic.name, topic.topic_id, dict(topic.partitions))
            self._topics[topic_id] = topic
        return topic

    def _change_partition(self, record: PartitionChangeRecord) -> None:
        partitions = self._topic_state(record.topic_id).partitions
        current = partitions.get(record.partition_id)
        if current is None:
            raise MetadataRecordError(
                f"PartitionChangeRecord for unknown partition {record.partition_id}"
            )
        partitions[record.partition_id] = merge_partition_change(current, record)

    def _set_config(self, record: ConfigRecord) -> None:
        if record.resource_type == BROKER_RESOURCE:
            self.broker_configs_changed = True
            configs = self._broker_configs.setdefault(record.resource_name, {})
        elif record.resource_type == TOPIC_RESOURCE:
            self._changed_topic_names.add(record.resource_name)
            configs = self._configs.setdefault(record.resource_name, {})
        elif record.resource_type == GROUP_RESOURCE:
            configs = self._group_configs.setdefault(record.resource_name, {})
        elif record.resource_type == CLIENT_METRICS_RESOURCE:
            configs = self._client_metrics.setdefault(record.resource_name, {})
        else:
            return
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value

    def core_delta(self, image: MetadataImage) -> _core.MetadataDelta:
        """What `build()` changed, in the shape `krust._core.Core.apply_metadata_delta`
        takes: the created or changed topics with only their new or changed partitions."""
        names = set(self._changed_topic_names)
        names.update(self._topics[topic_id].name for topic_id in self._changed_partitions)
        topics = []
        for name in sorted(names):
            topic = image.topics.get(name)
            if topic is None:  # removed again, or a config of a topic that does not exist
                continue
            before = self._base.topics.get(name)
            if before is None or before.topic_id != topic.topic_id:
                changed: Iterable[PartitionImage] = topic.partitions.values()
            else:
                indexes = sorted(self._changed_partitions.get(topic.topic_id, ()))
                changed = (topic.partitions[index] for index in indexes)
            topics.append(_core_topic(topic, changed))
        delta: _core.MetadataDelta = {
            "metadata_offset": image.metadata_offset,
            "controller_id": image.controller_id,
            "brokers": _core_brokers(image) if self._brokers_changed else None,
            "topics": topics,
            "deleted_topic_ids": [topic_id.bytes for topic_id in self._deleted_topic_ids],
            "finalized_features": dict(image.features) if self._features_changed else None,
        }
        if self.acls_changed:
            delta["acls_changed"] = True
        return delta


def merge_partition_change(
    current: PartitionImage, record: PartitionChangeRecord
) -> PartitionImage:
    """The partition after the change (Kafka's PartitionRegistration.merge): a record that
    names a leader, even the same one, bumps the leader epoch (a reassignment that drops
    replicas relies on it); every change bumps the partition epoch."""
    leader_set = record.leader != NO_LEADER_CHANGE

    def changed(new: tuple[int, ...] | None, old: tuple[int, ...]) -> tuple[int, ...]:
        return old if new is None else tuple(new)

    return replace(
        current,
        leader=record.leader if leader_set else current.leader,
        leader_epoch=current.leader_epoch + 1 if leader_set else current.leader_epoch,
        partition_epoch=current.partition_epoch + 1,
        replicas=changed(record.replicas, current.replicas),
        isr=changed(record.isr, current.isr),
        removing_replicas=changed(record.removing_replicas, current.removing_replicas),
        adding_replicas=changed(record.adding_replicas, current.adding_replicas),
        leader_recovery_state=current.leader_recovery_state
        if record.leader_recovery_state == -1
        else record.leader_recovery_state,
    )


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    """The ACL an AccessControlEntryRecord holds."""
    # The ACL types are imported on the first ACL: most logs have none, and the replay runs
    # before the port opens (docs/python-services.md, "Start-up order").
    from krust.plugins.authorizer import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    try:
        return AclBinding(
            ResourcePattern(
                ResourceType(record.resource_type),
                record.resource_name,
                PatternType(record.pattern_type),
            ),
            AccessControlEntry(
                record.principal,
                record.host,
                AclOperation(record.operation),
                AclPermissionType(record.permission_type),
            ),
        )
    except ValueError as error:
        raise MetadataRecordError(f"AccessControlEntryRecord {record.id}: {error}") from None


def entry_record(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    """The AccessControlEntryRecord that holds an ACL (`acl_binding`'s inverse)."""
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=binding.pattern.resource_type,
        resource_name=binding.pattern.name,
        pattern_type=binding.pattern.pattern_type,
        principal=binding.entry.principal,
        host=binding.entry.host,
        operation=binding.entry.operation,
        permission_type=binding.entry.permission_type,
    )


def core_credentials(image: MetadataImage) -> list[CoreCredential]:
    """The image's SCRAM credentials as `krust._core.Core.set_scram_credentials` takes them."""
    return [
        (r.name, r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations)
        for r in image.scram_credentials.values()
    ]


def to_core_image(image: MetadataImage) -> _core.MetadataImage:
    """The image in the shape `krust._core.Core.apply_metadata` takes (see _core.pyi)."""
    return {
        "cluster_id": image.cluster_id,
        "controller_id": image.controller_id,
        "metadata_offset": image.metadata_offset,
        "brokers": _core_brokers(image),
        "topics": [
            _core_topic(topic, topic.partitions.values()) for topic in image.topics.values()
        ],
        "supported_features": {
            name: (supported.min, supported.max) for name, supported in SUPPORTED_FEATURES.items()
        },
        "finalized_features": dict(image.features),
    }


def _core_brokers(image: MetadataImage) -> list[_core.BrokerImage]:
    return [
        {
            "node_id": b.node_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "listeners": {
                e.name: (e.host, e.port)
                for e in (b.registration.end_points if b.registration else ())
            },
        }
        for b in image.brokers.values()
        if not b.fenced
    ]


def _core_topic(topic: TopicImage, partitions: Iterable[PartitionImage]) -> _core.TopicImage:
    return {
        "name": topic.name,
        "topic_id": topic.topic_id.bytes,
        "internal": topic.internal,
        "configs": dict(topic.configs),
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in partitions
        ],
    }
