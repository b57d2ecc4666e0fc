"""Metadata snapshots: the image written as records replays to the same image, the controller
writes one when due, and a restart loads the newest one and replays only the log after it."""

from __future__ import annotations

import uuid
from pathlib import Path

from krust.controller.controller import Controller
from krust.controller.image import ImageBuilder, MetadataImage
from krust.controller.publisher import METADATA_TOPIC
from krust.controller.records import (
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
)
from krust.controller.snapshots import SnapshotSchedule, image_records

from .conftest import FakeCore, LoopRunner
from .test_controller import create, make_config, topic

KEPT = uuid.UUID(int=7)
REMOVED = uuid.UUID(int=8)


def history() -> list[MetadataRecord]:
    """A bit of everything the image holds, including what later records undo."""
    return [
        FeatureLevelRecord(name="metadata.version", feature_level=14),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=uuid.UUID(int=3),
            broker_epoch=1,
            end_points=(
                BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0),
            ),
            rack="r1",
            fenced=False,
        ),
        FeatureLevelRecord(name="group.version", feature_level=1),
        TopicRecord(name="kept", topic_id=KEPT),
        *(
            PartitionRecord(
                partition_id=p,
                topic_id=KEPT,
                replicas=(1,),
                isr=(1,),
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
            for p in range(3)
        ),
        ConfigRecord(
            resource_type=TOPIC_RESOURCE, resource_name="kept", name="retention.ms", value="1"
        ),
        ConfigRecord(
            resource_type=TOPIC_RESOURCE, resource_name="kept", name="segment.ms", value="9"
        ),
        ConfigRecord(
            resource_type=TOPIC_RESOURCE, resource_name="kept", name="segment.ms", value=None
        ),
        PartitionChangeRecord(partition_id=2, topic_id=KEPT, isr=(1,), leader=1),
        TopicRecord(name="removed", topic_id=REMOVED),
        RemoveTopicRecord(topic_id=REMOVED),
        ConfigRecord(
            resource_type=BROKER_RESOURCE, resource_name="", name="log.retention.ms", value="5"
        ),
        ConfigRecord(
            resource_type=CLIENT_METRICS_RESOURCE, resource_name="sub", name="metrics", value="*"
        ),
        ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=2000),
        FeatureLevelRecord(name="group.version", feature_level=0),
    ]


def replay(records: list[MetadataRecord]) -> MetadataImage:
    return ImageBuilder(MetadataImage.empty("c", 1)).replay_all(enumerate(records)).build()


def test_the_image_written_as_records_replays_to_the_same_image() -> None:
    image = replay(history())
    records = image_records(image)
    assert records[0] == FeatureLevelRecord(name="metadata.version", feature_level=14)
    assert not any(isinstance(r, RemoveTopicRecord) for r in records)
    again = ImageBuilder(MetadataImage.empty("c", 1))
    again.replay_all((image.metadata_offset, record) for record in records)
    assert again.build() == image
    assert image.topics["kept"].configs == {"retention.ms": "1"}
    assert image.next_producer_id == 2000
    assert image.client_metrics == {"sub": {"metrics": "*"}}


def test_a_snapshot_is_due_after_enough_bytes_or_once_the_interval_has_passed() -> None:
    now = [0.0]
    settings = {
        "metadata.log.max.record.bytes.between.snapshots": 100,
        "metadata.log.max.snapshot.interval.ms": 60_000,
    }
    schedule = SnapshotSchedule(settings, clock=lambda: now[0])
    now[0] = 120.0
    assert not schedule.due(), "nothing new to snapshot"
    schedule.appended(10)
    assert schedule.due(), "the interval has passed"
    schedule.started()
    schedule.appended(99)
    assert not schedule.due()
    schedule.appended(1)
    assert schedule.due(), "100 bytes since the last snapshot"
    never = SnapshotSchedule({**settings, "metadata.log.max.snapshot.interval.ms": 0})
    never.appended(1)
    now[0] = 10**9
    assert not never.due()


def test_a_restart_loads_the_newest_snapshot_and_replays_only_the_log_after_it(
    run: LoopRunner, tmp_path: Path, fake_core: FakeCore
) -> None:
    config = make_config([tmp_path], "metadata.log.max.record.bytes.between.snapshots=1")
    controller = Controller.open(config, fake_core)
    create(run, controller, topic("first", 2, configs=[{"name": "retention.ms", "value": "7"}]))
    create(run, controller, topic("second", 1))
    assert len(fake_core.snapshots) == 3, "after start-up's registration and each creation"
    end_offset = max(fake_core.snapshots)
    values = fake_core.snapshots[end_offset]
    assert end_offset == fake_core.log_end_offset(METADATA_TOPIC, 0)
    assert TopicRecord(name="second", topic_id=controller.image.topics["second"].topic_id) in [
        decode_record(value) for value in values
    ]
    # Below the snapshot the fake core's log is gone (its start is the snapshot's end).
    restarted = Controller.open(config, fake_core.reopen())
    before, after = controller.image, restarted.image
    assert after.topics == before.topics
    assert after.features == before.features
    assert after.brokers[1].epoch > before.brokers[1].epoch, "registered again after the tail"


def test_no_snapshot_is_written_before_enough_bytes(
    run: LoopRunner, tmp_path: Path, fake_core: FakeCore
) -> None:
    controller = Controller.open(make_config([tmp_path]), fake_core)
    create(run, controller, topic("t", 3))
    assert fake_core.snapshots == {}
