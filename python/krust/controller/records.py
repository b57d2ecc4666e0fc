"""KIP-631 metadata records, as Kafka writes them to `__cluster_metadata`.

Each class mirrors one version of a schema in Kafka's
metadata/src/main/resources/common/metadata/*.json (field order, types, tags; every one a
flexible version), in kio's entity style: `kafka_type` and `tag` in each field's metadata.
`record_codec` encodes and decodes them. The versions are the ones metadata.version 3.6-IV2
uses (see `METADATA_VERSION`).

A record value is framed as: unsigned varint frame version (1), unsigned varint api key,
unsigned varint record version, then the record body; the record key is null.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar, cast

from krust.controller.record_codec import read_struct, read_uvarint, write_struct, write_uvarint

FRAME_VERSION = 1
METADATA_VERSION_FEATURE = "metadata.version"
# metadata.version 3.6-IV2: the newest level whose records need neither directory
# assignment (KIP-858) nor controller registration (KIP-919), which krust does not model.
METADATA_VERSION = 14


def _kafka(kafka_type: str, **extra: object) -> dict[str, object]:
    return {"kafka_type": kafka_type, **extra}


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    name: str = field(metadata=_kafka("string"))
    host: str = field(metadata=_kafka("string"))
    port: int = field(metadata=_kafka("uint16"))
    security_protocol: int = field(metadata=_kafka("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    name: str = field(metadata=_kafka("string"))
    min_supported_version: int = field(metadata=_kafka("int16"))
    max_supported_version: int = field(metadata=_kafka("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    """A broker (re)registers: its endpoints, rack and epoch. Version 2."""

    __api_key__: ClassVar[int] = 0
    __version__: ClassVar[int] = 2
    broker_id: int = field(metadata=_kafka("int32"))
    is_migrating_zk_broker: bool = field(metadata=_kafka("bool"), default=False)
    incarnation_id: uuid.UUID = field(metadata=_kafka("uuid"))
    broker_epoch: int = field(metadata=_kafka("int64"))
    end_points: tuple[BrokerEndpoint, ...]
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = field(metadata=_kafka("string"), default=None)
    fenced: bool = field(metadata=_kafka("bool"), default=True)
    in_controlled_shutdown: bool = field(metadata=_kafka("bool"), default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord:
    """A broker's registration is removed (KIP-631). Version 0."""

    __api_key__: ClassVar[int] = 1
    __version__: ClassVar[int] = 0
    broker_id: int = field(metadata=_kafka("int32"))
    broker_epoch: int = field(metadata=_kafka("int64"))


# BrokerRegistrationChangeRecord.fenced: Kafka's BrokerRegistrationFencingChange.
FENCE = 1
UNFENCE = -1
# BrokerRegistrationChangeRecord.in_controlled_shutdown: Kafka's
# BrokerRegistrationInControlledShutdownChange.
IN_CONTROLLED_SHUTDOWN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord:
    """A registered broker is fenced, unfenced or enters controlled shutdown; 0 means no
    change. Version 1 (version 2 adds the log dirs of KIP-858)."""

    __api_key__: ClassVar[int] = 17
    __version__: ClassVar[int] = 1
    broker_id: int = field(metadata=_kafka("int32"))
    broker_epoch: int = field(metadata=_kafka("int64"))
    fenced: int = field(metadata=_kafka("int8", tag=0), default=0)
    in_controlled_shutdown: int = field(metadata=_kafka("int8", tag=1), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """A topic is created. Version 0."""

    __api_key__: ClassVar[int] = 2
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_kafka("string"))
    topic_id: uuid.UUID = field(metadata=_kafka("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """A partition is created (or wholly replaced). Version 0."""

    __api_key__: ClassVar[int] = 3
    __version__: ClassVar[int] = 0
    partition_id: int = field(metadata=_kafka("int32"))
    topic_id: uuid.UUID = field(metadata=_kafka("uuid"))
    replicas: tuple[int, ...] = field(metadata=_kafka("int32"))
    isr: tuple[int, ...] = field(metadata=_kafka("int32"))
    removing_replicas: tuple[int, ...] = field(metadata=_kafka("int32"), default=())
    adding_replicas: tuple[int, ...] = field(metadata=_kafka("int32"), default=())
    leader: int = field(metadata=_kafka("int32"))
    leader_recovery_state: int = field(metadata=_kafka("int8", tag=0), default=0)
    leader_epoch: int = field(metadata=_kafka("int32"))
    partition_epoch: int = field(metadata=_kafka("int32"))


NO_LEADER_CHANGE = -2


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord:
    """A partition's leader, ISR or replicas change; None/-2 mean unchanged. Version 0."""

    __api_key__: ClassVar[int] = 5
    __version__: ClassVar[int] = 0
    partition_id: int = field(metadata=_kafka("int32"))
    topic_id: uuid.UUID = field(metadata=_kafka("uuid"))
    isr: tuple[int, ...] | None = field(metadata=_kafka("int32", tag=0), default=None)
    leader: int = field(metadata=_kafka("int32", tag=1), default=NO_LEADER_CHANGE)
    replicas: tuple[int, ...] | None = field(metadata=_kafka("int32", tag=2), default=None)
    removing_replicas: tuple[int, ...] | None = field(metadata=_kafka("int32", tag=3), default=None)
    adding_replicas: tuple[int, ...] | None = field(metadata=_kafka("int32", tag=4), default=None)
    leader_recovery_state: int = field(metadata=_kafka("int8", tag=5), default=-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginTransactionRecord:
    """The records up to the next EndTransactionRecord apply together, or not at all if an
    AbortTransactionRecord comes first (KIP-868). Version 0."""

    __api_key__: ClassVar[int] = 23
    __version__: ClassVar[int] = 0
    name: str | None = field(metadata=_kafka("string", tag=0), default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRecord:
    """The open metadata transaction applies (KIP-868). Version 0."""

    __api_key__: ClassVar[int] = 24
    __version__: ClassVar[int] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortTransactionRecord:
    """The open metadata transaction's records are dropped (KIP-868). Version 0."""

    __api_key__: ClassVar[int] = 25
    __version__: ClassVar[int] = 0
    reason: str | None = field(metadata=_kafka("string", tag=0), default=None)


TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER
CLIENT_METRICS_RESOURCE = 16  # Kafka's ConfigResource.Type.CLIENT_METRICS (KIP-714)
GROUP_RESOURCE = 32  # Kafka's ConfigResource.Type.GROUP


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    """A config of a resource is set (value) or deleted (None). Version 0."""

    __api_key__: ClassVar[int] = 4
    __version__: ClassVar[int] = 0
    resource_type: int = field(metadata=_kafka("int8"))
    resource_name: str = field(metadata=_kafka("string"))
    name: str = field(metadata=_kafka("string"))
    value: str | None = field(metadata=_kafka("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord:
    """A topic and all its partitions and configs are deleted. Version 0."""

    __api_key__: ClassVar[int] = 9
    __version__: ClassVar[int] = 0
    topic_id: uuid.UUID = field(metadata=_kafka("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord:
    """A finalized feature level (metadata.version first of all). Version 0."""

    __api_key__: ClassVar[int] = 12
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_kafka("string"))
    feature_level: int = field(metadata=_kafka("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord:
    """A block of producer ids was handed out; the next block starts at next_producer_id.
    Version 0."""

    __api_key__: ClassVar[int] = 15
    __version__: ClassVar[int] = 0
    broker_id: int = field(metadata=_kafka("int32"))
    broker_epoch: int = field(metadata=_kafka("int64"), default=-1)
    next_producer_id: int = field(metadata=_kafka("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord:
    """An ACL is created (Kafka's StandardAcl, with its id). Version 0."""

    __api_key__: ClassVar[int] = 18
    __version__: ClassVar[int] = 0
    id: uuid.UUID = field(metadata=_kafka("uuid"))
    resource_type: int = field(metadata=_kafka("int8"))
    resource_name: str = field(metadata=_kafka("string"))
    pattern_type: int = field(metadata=_kafka("int8"))
    principal: str = field(metadata=_kafka("string"))
    host: str = field(metadata=_kafka("string"))
    operation: int = field(metadata=_kafka("int8"))
    permission_type: int = field(metadata=_kafka("int8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord:
    """An ACL is deleted. Version 0."""

    __api_key__: ClassVar[int] = 19
    __version__: ClassVar[int] = 0
    id: uuid.UUID = field(metadata=_kafka("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaEntityData:
    entity_type: str = field(metadata=_kafka("string"))
    entity_name: str | None = field(metadata=_kafka("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord:
    """A client quota of an entity (user, client-id, both, or ip; a None name is the entity
    type's default) is set, or removed. Version 0."""

    __api_key__: ClassVar[int] = 14
    __version__: ClassVar[int] = 0
    entity: tuple[QuotaEntityData, ...]
    key: str = field(metadata=_kafka("string"))
    value: float = field(metadata=_kafka("float64"))
    remove: bool = field(metadata=_kafka("bool"), default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism is set (KIP-554): salt, stored and server
    keys and iterations, never the password. Version 0."""

    __api_key__: ClassVar[int] = 11
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_kafka("string"))
    mechanism: int = field(metadata=_kafka("int8"))
    salt: bytes = field(metadata=_kafka("bytes"))
    stored_key: bytes = field(metadata=_kafka("bytes"))
    server_key: bytes = field(metadata=_kafka("bytes"))
    iterations: int = field(metadata=_kafka("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism is deleted. Version 0."""

    __api_key__: ClassVar[int] = 22
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_kafka("string"))
    mechanism: int = field(metadata=_kafka("int8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOpRecord:
    """Advances the log without changing anything. Version 0."""

    __api_key__: ClassVar[int] = 20
    __version__: ClassVar[int] = 0


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | NoOpRecord
    | BeginTransactionRecord
    | EndTransactionRecord
    | AbortTransactionRecord
)
RECORD_TYPES: dict[tuple[int, int], type[MetadataRecord]] = {
    (cls.__api_key__, cls.__version__): cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        ConfigRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        NoOpRecord,
        BeginTransactionRecord,
        EndTransactionRecord,
        AbortTransactionRecord,
    )
}


class MetadataRecordError(ValueError):
    """A metadata log record krust cannot read."""


def encode_record(record: MetadataRecord) -> bytes:
    """The framed record value."""
    buffer = bytearray()
    for header in (FRAME_VERSION, record.__api_key__, record.__version__):
        write_uvarint(buffer, header)
    write_struct(buffer, record)
    return bytes(buffer)


def decode_record(value: bytes) -> MetadataRecord:
    """The record of a framed value; raises MetadataRecordError for anything unreadable."""
    try:
        frame_version, offset = read_uvarint(value, 0)
        api_key, size = read_uvarint(value, offset)
        offset += size
        version, size = read_uvarint(value, offset)
        offset += size
    except Exception as error:
        raise MetadataRecordError(f"truncated record frame: {error}") from None
    if frame_version != FRAME_VERSION:
        raise MetadataRecordError(f"unsupported frame version {frame_version}")
    record_type = RECORD_TYPES.get((api_key, version))
    if record_type is None:
        raise MetadataRecordError(f"unsupported record: api key {api_key} version {version}")
    try:
        record, size = read_struct(record_type, value, offset)
    except Exception as error:
        raise MetadataRecordError(f"malformed {record_type.__name__}: {error}") from None
    if offset + size != len(value):
        raise MetadataRecordError(f"{len(value) - offset - size} trailing bytes after a record")
    # read_struct is untyped; it returns a `record_type`.
    return cast(MetadataRecord, record)
