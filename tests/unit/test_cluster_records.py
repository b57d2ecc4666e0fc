"""The cluster records (KIP-631 broker lifecycle, partition changes, KIP-868 transactions):
their encoding, their replay into the image, and snapshots that replay to the same image."""

from __future__ import annotations

import uuid

import pytest
from krust.controller.image import ImageBuilder, MetadataImage
from krust.controller.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    UNFENCE,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    EndTransactionRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
)
from krust.controller.snapshots import image_records

from .cluster_images import (
    CLUSTER_ID,
    TOPIC_ID,
    broker,
    cluster,
    part,
    partition,
    replay,
    with_topic,
)


@pytest.mark.parametrize(
    "record",
    [
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=7, fenced=UNFENCE),
        BrokerRegistrationChangeRecord(
            broker_id=2, broker_epoch=7, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN
        ),
        UnregisterBrokerRecord(broker_id=3, broker_epoch=9),
        BeginTransactionRecord(name="create topics"),
        EndTransactionRecord(),
        AbortTransactionRecord(reason="failed"),
        PartitionChangeRecord(
            partition_id=1,
            topic_id=TOPIC_ID,
            replicas=(1, 2, 3),
            adding_replicas=(3,),
            removing_replicas=(1,),
            leader_recovery_state=1,
        ),
    ],
)
def test_cluster_records_round_trip(record: object) -> None:
    assert decode_record(encode_record(record)) == record  # type: ignore[arg-type]


def test_fencing_change_is_encoded_as_kafka_writes_it() -> None:
    record = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=UNFENCE)
    # frame 1, api key 17, version 1; broker id, epoch; one tagged field: tag 0, size 1, -1.
    assert encode_record(record).hex() == "011101000000010000000000000005010001ff"


def test_brokers_are_fenced_unfenced_shut_down_and_unregistered() -> None:
    image = cluster(brokers=(1, 2))
    epoch = image.brokers[2].epoch
    image = replay(
        image, [BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=epoch, fenced=FENCE)]
    )
    assert image.brokers[2].fenced and image.live_brokers == (1,)
    assert image.brokers[2].registration is not None and image.brokers[2].registration.fenced
    image = replay(
        image,
        [
            BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=epoch, fenced=UNFENCE),
            BrokerRegistrationChangeRecord(
                broker_id=2, broker_epoch=epoch, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN
            ),
        ],
    )
    assert not image.brokers[2].fenced and image.brokers[2].in_controlled_shutdown
    assert image.live_brokers == (1, 2) and image.active_brokers == (1,)
    image = replay(image, [UnregisterBrokerRecord(broker_id=2, broker_epoch=epoch)])
    assert list(image.brokers) == [1]


def test_broker_changes_with_another_epoch_are_refused() -> None:
    image = cluster(brokers=(1, 2))
    with pytest.raises(MetadataRecordError, match="epoch 99"):
        replay(image, [BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=99, fenced=FENCE)])
    with pytest.raises(MetadataRecordError, match="unregistered broker 7"):
        replay(image, [UnregisterBrokerRecord(broker_id=7, broker_epoch=0)])


def test_the_core_learns_only_unfenced_brokers() -> None:
    image = cluster(brokers=(1, 2))
    builder = ImageBuilder(image)
    builder.replay(
        10,
        BrokerRegistrationChangeRecord(
            broker_id=2, broker_epoch=image.brokers[2].epoch, fenced=FENCE
        ),
    )
    delta = builder.core_delta(builder.build())
    assert [b["node_id"] for b in delta["brokers"] or []] == [1]


def test_a_change_naming_the_same_leader_bumps_the_leader_epoch() -> None:
    image = with_topic(cluster(), partition(0, (1, 2, 3)))
    image = replay(
        image, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1, replicas=(1, 2))]
    )
    changed = part(image)
    assert (changed.leader, changed.leader_epoch, changed.partition_epoch) == (1, 1, 1)
    assert changed.replicas == (1, 2)


def test_partition_changes_carry_reassignments_and_recovery_state() -> None:
    image = with_topic(cluster(), partition(0, (1, 2)))
    image = replay(
        image,
        [
            PartitionChangeRecord(
                partition_id=0,
                topic_id=TOPIC_ID,
                replicas=(3, 1, 2),
                adding_replicas=(3,),
                removing_replicas=(2,),
            ),
            PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader_recovery_state=1),
        ],
    )
    changed = part(image)
    assert changed.adding_replicas == (3,) and changed.removing_replicas == (2,)
    assert changed.reassigning and changed.leader_recovery_state == 1
    image = replay(
        image, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, adding_replicas=())]
    )
    assert part(image).adding_replicas == () and part(image).leader_recovery_state == 1


def test_a_transaction_applies_at_its_end_and_vanishes_when_aborted() -> None:
    image = cluster()
    builder = ImageBuilder(image)
    start = image.metadata_offset + 1
    builder.replay(start, BeginTransactionRecord(name="t"))
    builder.replay(start + 1, TopicRecord(name="t", topic_id=TOPIC_ID))
    builder.replay(start + 2, partition(0, (1,)))
    assert builder.in_transaction
    assert "t" not in builder.build().topics
    builder.replay(start + 3, EndTransactionRecord())
    committed = builder.build()
    assert not builder.in_transaction
    assert part(committed).replicas == (1,) and committed.metadata_offset == start + 3

    builder = ImageBuilder(committed)
    builder.replay(start + 4, BeginTransactionRecord())
    builder.replay(start + 5, TopicRecord(name="u", topic_id=uuid.uuid4()))
    builder.replay(start + 6, AbortTransactionRecord(reason="no"))
    aborted = builder.build()
    assert "u" not in aborted.topics and aborted.metadata_offset == start + 6


def test_transaction_markers_out_of_place_are_refused() -> None:
    builder = ImageBuilder(cluster())
    with pytest.raises(MetadataRecordError, match="outside a transaction"):
        builder.replay(10, EndTransactionRecord())
    builder.replay(10, BeginTransactionRecord())
    with pytest.raises(MetadataRecordError, match="inside a transaction"):
        builder.replay(11, BeginTransactionRecord())


def test_snapshots_replay_to_the_same_cluster_image() -> None:
    image = with_topic(
        cluster(
            broker(4, epoch=9, rack="r1"),
            brokers=(1, 2, 3),
        ),
        partition(0, (1, 2, 3), isr=(1, 2), leader=2),
        partition(
            1, (3, 4, 1), adding_replicas=(4,), removing_replicas=(2,), leader_recovery_state=1
        ),
    )
    image = replay(
        image,
        [
            BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=9, fenced=FENCE),
            BrokerRegistrationChangeRecord(
                broker_id=3,
                broker_epoch=image.brokers[3].epoch,
                in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
            ),
            PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1, isr=(1,)),
        ],
    )
    restored = replay(MetadataImage.empty(CLUSTER_ID, 1), image_records(image))
    assert restored.brokers == image.brokers
    assert restored.topics == image.topics
    assert restored.brokers[4].fenced and restored.brokers[3].in_controlled_shutdown
    assert part(restored, 1).adding_replicas == (4,)
