"""In-memory metadata images of small clusters, built by replaying records, for the tests of
the controller's cluster decisions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from krust.controller.image import ImageBuilder, MetadataImage, PartitionImage
from krust.controller.records import (
    METADATA_VERSION,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

CLUSTER_ID = "cluster-one"
TOPIC_ID = uuid.UUID(int=0x1234)


def broker(
    node_id: int,
    epoch: int = 0,
    fenced: bool = False,
    rack: str | None = None,
    in_controlled_shutdown: bool = False,
    incarnation: uuid.UUID | None = None,
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=node_id,
        incarnation_id=incarnation or uuid.UUID(int=node_id),
        broker_epoch=epoch,
        end_points=(
            BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + node_id, security_protocol=0),
        ),
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown,
    )


def partition(
    index: int,
    replicas: Sequence[int],
    isr: Sequence[int] | None = None,
    leader: int | None = None,
    topic_id: uuid.UUID = TOPIC_ID,
    **fields: object,
) -> PartitionRecord:
    isr = tuple(replicas if isr is None else isr)
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=tuple(replicas),
        isr=isr,
        leader=isr[0] if leader is None else leader,
        leader_epoch=0,
        partition_epoch=0,
        **fields,  # type: ignore[arg-type]
    )


def cluster(*records: MetadataRecord, brokers: Sequence[int] = (1, 2, 3)) -> MetadataImage:
    """An image with metadata.version, unfenced brokers `brokers` (broker epoch = offset),
    then `records`, each record at its own offset."""
    head: list[MetadataRecord] = [
        FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION)
    ]
    head += [broker(b, epoch=offset) for offset, b in enumerate(brokers, start=1)]
    return replay(MetadataImage.empty(CLUSTER_ID, 1), [*head, *records])


def replay(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataImage:
    start = image.metadata_offset + 1
    return ImageBuilder(image).replay_all(enumerate(records, start=start)).build()


def with_topic(
    image: MetadataImage,
    *partitions: PartitionRecord,
    name: str = "t",
    configs: dict[str, str] | None = None,
) -> MetadataImage:
    topic_id = partitions[0].topic_id if partitions else TOPIC_ID
    records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
    records += [
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
        for k, v in (configs or {}).items()
    ]
    records += partitions
    return replay(image, records)


def part(image: MetadataImage, index: int = 0, name: str = "t") -> PartitionImage:
    return image.topics[name].partitions[index]
