"""Leaders and ISRs after fencing and unfencing, on AlterPartition and on ElectLeaders, as
Kafka's ReplicationControlManager decides them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from krust.config.broker import load_config
from krust.controller.broker_configs import EffectiveBrokerConfig
from krust.controller.image import MetadataImage
from krust.controller.records import FENCE, IN_CONTROLLED_SHUTDOWN, BrokerRegistrationChangeRecord
from krust.controller.replication import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    IsrMember,
    PartitionAlteration,
    fence_broker_updates,
    plan_alter_partition,
    plan_elect_leaders,
    unclean_election_enabled,
    unfence_broker_updates,
)

from .cluster_images import TOPIC_ID, cluster, part, partition, replay, with_topic

STATIC = load_config(None, {}, ["log.dirs=/nonexistent", "listeners=PLAINTEXT://h:1"])


def never(topic: str) -> bool:
    return False


def always(topic: str) -> bool:
    return True


def change(image: MetadataImage, broker: int, **fields: Any) -> MetadataImage:
    epoch = image.brokers[broker].epoch
    return replay(
        image, [BrokerRegistrationChangeRecord(broker_id=broker, broker_epoch=epoch, **fields)]
    )


def test_fencing_a_leader_elects_a_new_one_from_the_isr() -> None:
    image = with_topic(
        cluster(),
        partition(0, (1, 2, 3), leader=1),
        partition(1, (2, 1, 3), leader=2),
        partition(2, (2, 3), leader=2),
    )
    image = replay(image, fence_broker_updates(image, 1, never))
    assert (part(image, 0).leader, part(image, 0).isr) == (2, (2, 3))
    assert part(image, 0).leader_epoch == 1
    assert (part(image, 1).leader, part(image, 1).isr) == (2, (2, 3))
    assert part(image, 1).leader_epoch == 0  # the leader did not change
    assert part(image, 2).partition_epoch == 0  # broker 1 was not in it


def test_fencing_the_last_isr_member_leaves_no_leader_until_it_returns() -> None:
    image = with_topic(cluster(), partition(0, (1, 2), isr=(1,)))
    image = change(image, 1, fenced=FENCE)
    image = replay(image, fence_broker_updates(image, 1, never))
    assert (part(image).leader, part(image).isr) == (-1, (1,))
    image = replay(image, unfence_broker_updates(image, 1, never))
    assert (part(image).leader, part(image).isr, part(image).leader_epoch) == (1, (1,), 2)


def test_an_unclean_election_after_fencing_needs_the_config() -> None:
    image = with_topic(cluster(), partition(0, (1, 2), isr=(1,)))
    clean = replay(image, fence_broker_updates(image, 1, never))
    assert part(clean).leader == -1
    unclean = replay(image, fence_broker_updates(image, 1, always))
    assert (part(unclean).leader, part(unclean).isr, part(unclean).leader_recovery_state) == (
        2,
        (2,),
        1,
    )


def test_unclean_election_follows_the_topic_then_the_broker_config() -> None:
    image = with_topic(cluster(), partition(0, (1, 2), isr=(1,)))
    assert not unclean_election_enabled(image, STATIC, "t")
    cluster_wide = EffectiveBrokerConfig(STATIC, None, {"unclean.leader.election.enable": "true"})
    assert unclean_election_enabled(image, cluster_wide, "t")
    on_topic = with_topic(
        cluster(),
        partition(0, (1, 2), isr=(1,)),
        configs={"unclean.leader.election.enable": "false"},
    )
    assert not unclean_election_enabled(on_topic, cluster_wide, "t")
    static = load_config(
        None,
        {},
        [
            "log.dirs=/nonexistent",
            "listeners=PLAINTEXT://h:1",
            "unclean.leader.election.enable=true",
        ],
    )
    assert unclean_election_enabled(image, static, "t")

    # And it acts: the fenced sole ISR member is replaced only where it is enabled.
    def unclean(topic: str) -> bool:
        return unclean_election_enabled(image, cluster_wide, topic)

    fenced = replay(image, fence_broker_updates(image, 1, unclean))
    assert part(fenced).leader == 2


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr() -> None:
    image = with_topic(cluster(), partition(0, (1, 2, 3)))
    image = change(image, 1, in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN)
    image = replay(image, fence_broker_updates(image, 1, never))
    assert (part(image).leader, part(image).isr) == (2, (2, 3))


def alter(
    image: MetadataImage,
    isr: tuple[int, ...],
    broker: int = 1,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    topic_id: uuid.UUID = TOPIC_ID,
    epochs: dict[int, int] | None = None,
    recovery: int = 0,
) -> tuple[MetadataImage, dict[str, Any]]:
    members = tuple(IsrMember(b, (epochs or {}).get(b, -1)) for b in isr)
    alteration = PartitionAlteration(0, leader_epoch, partition_epoch, members, recovery)
    plan = plan_alter_partition(image, broker, [(topic_id, [alteration])], never)
    return replay(image, plan.records), plan.results[0]["partitions"][0]


def test_alter_partition_shrinks_and_expands_the_isr() -> None:
    image = with_topic(cluster(), partition(0, (1, 2, 3)))
    image, result = alter(image, (1, 2))
    assert result["error_code"] == ErrorCode.none
    assert (result["isr"], result["leader_epoch"], result["partition_epoch"]) == ((1, 2), 0, 1)
    assert part(image).isr == (1, 2)
    image, result = alter(image, (1, 2, 3), partition_epoch=1)
    assert (result["isr"], result["partition_epoch"]) == ((1, 2, 3), 2)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"leader_epoch": -1}, ErrorCode.fenced_leader_epoch),
        ({"leader_epoch": 1}, ErrorCode.not_controller),
        ({"partition_epoch": -1}, ErrorCode.invalid_update_version),
        ({"broker": 2}, ErrorCode.invalid_request),
        ({"isr": (2, 3)}, ErrorCode.invalid_request),  # without the leader
        ({"isr": (1, 4)}, ErrorCode.invalid_request),  # not a replica
        ({"isr": (1, 2), "recovery": 1}, ErrorCode.invalid_request),
        ({"isr": (1, 3)}, ErrorCode.ineligible_replica),  # 3 is fenced
        ({"isr": (1, 2), "epochs": {2: 77}}, ErrorCode.ineligible_replica),
        ({"topic_id": uuid.uuid4()}, ErrorCode.unknown_topic_id),
    ],
)
def test_alter_partition_refusals(fields: dict[str, Any], error: ErrorCode) -> None:
    image = with_topic(cluster(), partition(0, (1, 2, 3), isr=(1, 2)))
    image = change(image, 3, fenced=FENCE)
    isr = fields.pop("isr", (1, 2, 3))
    after, result = alter(image, isr, **fields)
    assert result["error_code"] == error
    assert after == image


def test_alter_partition_completing_a_reassignment_reports_the_new_leader() -> None:
    image = with_topic(
        cluster(), partition(0, (2, 1), isr=(1,), adding_replicas=(2,), removing_replicas=(1,))
    )
    after, result = alter(image, (1, 2))
    assert result["error_code"] == ErrorCode.new_leader_elected
    assert (part(after).replicas, part(after).leader, part(after).isr) == ((2,), 2, (2,))


def elect(image: MetadataImage, kind: int, requested: Any = None) -> tuple[MetadataImage, Any]:
    records, results = plan_elect_leaders(image, kind, requested)
    return replay(image, records), results


def test_preferred_election_moves_leadership_back() -> None:
    image = with_topic(
        cluster(),
        partition(0, (1, 2), leader=2),
        partition(1, (2, 1)),
        partition(2, (3, 1), leader=1),
    )
    image = change(image, 3, fenced=FENCE)
    after, results = elect(image, PREFERRED_ELECTION, [("t", (0, 1, 2, 7)), ("nope", (0,))])
    assert part(after, 0).leader == 1
    codes = [(r["partition_id"], r["error_code"]) for r in results[0]["partition_result"]]
    assert codes == [
        (0, ErrorCode.none),
        (1, ErrorCode.election_not_needed),
        (2, ErrorCode.preferred_leader_not_available),
        (7, ErrorCode.unknown_topic_or_partition),
    ]
    assert results[1]["partition_result"][0]["error_message"] == "No such topic as nope"


def test_electing_every_partition_reports_only_those_that_needed_it() -> None:
    image = with_topic(cluster(), partition(0, (1, 2), leader=2), partition(1, (2, 1)))
    _, results = elect(image, PREFERRED_ELECTION)
    assert results == [
        {
            "topic": "t",
            "partition_result": [
                {"partition_id": 0, "error_code": ErrorCode.none, "error_message": None}
            ],
        }
    ]


def test_unclean_election_picks_a_live_replica_of_a_leaderless_partition() -> None:
    image = with_topic(cluster(), partition(0, (1, 2), isr=(1,)), partition(1, (2, 3)))
    image = change(image, 1, fenced=FENCE)
    image = replay(image, fence_broker_updates(image, 1, never))
    after, results = elect(image, UNCLEAN_ELECTION, [("t", (0, 1))])
    assert [r["error_code"] for r in results[0]["partition_result"]] == [
        ErrorCode.none,
        ErrorCode.election_not_needed,
    ]
    assert (part(after).leader, part(after).isr) == (2, (2,))
    image = change(image, 2, fenced=FENCE)
    _, results = elect(image, UNCLEAN_ELECTION, [("t", (0,))])
    assert results[0]["partition_result"][0]["error_code"] == (
        ErrorCode.eligible_leaders_not_available
    )
