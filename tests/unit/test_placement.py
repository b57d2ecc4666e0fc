"""Replica placement for new partitions: Kafka's StripedReplicaPlacer over the active brokers."""

from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode
from krust.config.broker import load_config
from krust.controller.placement import PlacementError, place_replicas
from krust.controller.records import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    BrokerRegistrationChangeRecord,
    PartitionRecord,
)
from krust.controller.topics import (
    PartitionsSpec,
    TopicSpec,
    plan_create_partitions,
    plan_create_topics,
)

from .cluster_images import broker, cluster, replay

CONFIG = load_config(None, {}, ["log.dirs=/nonexistent", "listeners=PLAINTEXT://h:1"])


def test_leaders_are_staggered_and_followers_distinct() -> None:
    placed = place_replicas({1: None, 2: None, 3: None}, 6, 3, random.Random(7))
    assert all(len(set(replicas)) == 3 for replicas in placed)
    # Each round of three partitions has each broker lead once.
    assert {replicas[0] for replicas in placed[:3]} == {1, 2, 3}
    assert {replicas[0] for replicas in placed[3:]} == {1, 2, 3}


def test_the_start_is_random() -> None:
    firsts = {
        place_replicas({1: None, 2: None, 3: None}, 1, 1, random.Random(seed))[0][0]
        for seed in range(30)
    }
    assert firsts == {1, 2, 3}


def test_replicas_spread_over_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for replicas in place_replicas(racks, 12, 3, random.Random(3)):
        assert len({racks[b] for b in replicas}) == 3
    two_racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in place_replicas(two_racks, 8, 2, random.Random(5)):
        assert {two_racks[b] for b in replicas} == {"a", "b"}


@pytest.mark.parametrize(
    ("brokers", "factor", "message"),
    [
        (
            {1: None, 2: None},
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) "
            "are registered.",
        ),
        ({1: None}, 0, "Invalid replication factor 0: the replication factor must be positive."),
        ({}, 1, "All brokers are currently fenced."),
    ],
)
def test_impossible_factors_are_refused(
    brokers: dict[int, str | None], factor: int, message: str
) -> None:
    with pytest.raises(PlacementError) as raised:
        place_replicas(brokers, 1, factor)
    assert str(raised.value) == message


def test_new_topics_are_placed_on_active_brokers_only() -> None:
    image = cluster(brokers=(1, 2, 3, 4))
    image = replay(
        image,
        [
            BrokerRegistrationChangeRecord(
                broker_id=3, broker_epoch=image.brokers[3].epoch, fenced=FENCE
            ),
            BrokerRegistrationChangeRecord(
                broker_id=4,
                broker_epoch=image.brokers[4].epoch,
                in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN,
            ),
        ],
    )
    plan = plan_create_topics(image, CONFIG, [TopicSpec("t", 4, 2)])
    partitions = [r for r in plan.records if isinstance(r, PartitionRecord)]
    assert {b for p in partitions for b in p.replicas} == {1, 2}
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in partitions)

    refused = plan_create_topics(image, CONFIG, [TopicSpec("u", 1, 3)])
    assert refused.results[0]["error_code"] == ErrorCode.invalid_replication_factor
    assert refused.results[0]["error_message"] == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 2 broker(s) are registered."
    )


def test_manual_assignments_to_unknown_brokers_are_refused() -> None:
    image = cluster(brokers=(1, 2))
    plan = plan_create_topics(image, CONFIG, [TopicSpec("t", assignments=((0, (1, 9)),))])
    assert plan.results[0]["error_code"] == ErrorCode.invalid_replica_assignment
    assert "broker 9, but no such broker is registered" in plan.results[0]["error_message"]


def test_a_manual_assignment_leads_with_its_first_active_replica() -> None:
    image = cluster(broker(3, epoch=9, fenced=True), brokers=(1, 2))
    plan = plan_create_topics(image, CONFIG, [TopicSpec("t", assignments=((0, (3, 2, 1)),))])
    (record,) = [r for r in plan.records if isinstance(r, PartitionRecord)]
    assert (record.leader, record.isr) == (2, (2, 1))


def test_new_partitions_are_placed_like_new_topics() -> None:
    image = cluster(brokers=(1, 2, 3))
    image = replay(image, plan_create_topics(image, CONFIG, [TopicSpec("t", 1, 3)]).records)
    plan = plan_create_partitions(image, [PartitionsSpec("t", 4)])
    assert [len(set(r.replicas)) for r in plan.records if isinstance(r, PartitionRecord)] == [
        3,
        3,
        3,
    ]
