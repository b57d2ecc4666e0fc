"""Metadata snapshots: the image written back as records (Kafka's MetadataImage.write), and
when to write one (Kafka's SnapshotGenerator: after `metadata.log.max.record.bytes.between.
snapshots` of new records, or `metadata.log.max.snapshot.interval.ms` after the last one).

The core stores them as KRaft `.checkpoint` files and trims the log behind them; see
docs/metadata-log.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from krust.controller.client_quotas import client_quota_records
from krust.controller.image import MetadataImage, entry_record
from krust.controller.records import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    METADATA_VERSION_FEATURE,
    TOPIC_RESOURCE,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
)


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """Records that replay into `image` from an empty one, metadata.version first (a loader
    needs it before anything else), then brokers, topics with their partitions and configs,
    broker configs, the producer id block, the ACLs, client quotas and SCRAM credentials."""
    records: list[MetadataRecord] = []
    features = sorted(image.features.items(), key=lambda f: f[0] != METADATA_VERSION_FEATURE)
    records.extend(FeatureLevelRecord(name=name, feature_level=level) for name, level in features)
    records.extend(broker.registration for broker in image.brokers.values() if broker.registration)
    for topic in image.topics.values():
        records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
        records.extend(
            PartitionRecord(
                partition_id=p.partition,
                topic_id=topic.topic_id,
                replicas=p.replicas,
                isr=p.isr,
                removing_replicas=p.removing_replicas,
                adding_replicas=p.adding_replicas,
                leader=p.leader,
                leader_recovery_state=p.leader_recovery_state,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
            )
            for p in topic.partitions.values()
        )
        records.extend(_config_records(TOPIC_RESOURCE, topic.name, topic.configs))
    for name, configs in image.broker_configs.items():
        records.extend(_config_records(BROKER_RESOURCE, name, configs))
    for name, configs in image.group_configs.items():
        records.extend(_config_records(GROUP_RESOURCE, name, configs))
    for name, configs in image.client_metrics.items():
        records.extend(_config_records(CLIENT_METRICS_RESOURCE, name, configs))
    if image.next_producer_id > 0:
        # As Kafka's ProducerIdsImage writes it: only the next block's start survives.
        records.append(ProducerIdsRecord(broker_id=-1, next_producer_id=image.next_producer_id))
    records.extend(entry_record(acl_id, acl) for acl_id, acl in image.acls.items())
    records.extend(client_quota_records(image.client_quotas))
    records.extend(image.scram_credentials[key] for key in sorted(image.scram_credentials))
    return records


def _config_records(
    resource_type: int, resource_name: str, configs: Mapping[str, str]
) -> list[MetadataRecord]:
    return [
        ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=k, value=v)
        for k, v in sorted(configs.items())
    ]


class SnapshotSchedule:
    """Decides when the controller writes the next snapshot, from the bytes appended to the
    metadata log and the time since the last snapshot (0: no time-based snapshots)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_bytes: int = config["metadata.log.max.record.bytes.between.snapshots"]
        self._max_interval_s: float = config["metadata.log.max.snapshot.interval.ms"] / 1000
        self._clock = clock
        self._bytes = 0
        self._last = clock()

    def appended(self, size: int) -> None:
        self._bytes += size

    def due(self) -> bool:
        """Whether records were appended since the last snapshot and one of the limits is hit."""
        if self._bytes == 0:
            return False
        if self._bytes >= self._max_bytes:
            return True
        return self._max_interval_s > 0 and self._clock() - self._last >= self._max_interval_s

    def started(self) -> None:
        """A snapshot of everything appended so far is being written."""
        self._bytes = 0
        self._last = self._clock()
