"""Properties of the controller's partition rules for generated partitions, brokers and
requests: PartitionChangeBuilder with merge_partition_change (krust.controller.partition_change,
.image), the fencing and unfencing plans (.replication) and replica placement (.placement), as
Kafka's PartitionChangeBuilder, ReplicationControlManager and StripedReplicaPlacer keep them.

- the leader is in the ISR (or there is none), the ISR is a non-empty subset of the replicas;
- an unclean election (a leader from outside the ISR) happens only when allowed, leaves the new
  leader alone in the ISR and marks it RECOVERING (KIP-704);
- the leader epoch rises by one exactly when a record names a leader (a new one, or the same one
  when replicas leave), the partition epoch by one on every record; no record changes nothing;
- placement: each partition's replicas are distinct active brokers, spread over as many racks as
  the replication factor allows, and leaders take turns.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from krust.controller.image import MetadataImage, PartitionImage, merge_partition_change
from krust.controller.partition_change import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChangeBuilder,
    ReassignmentReplicas,
)
from krust.controller.placement import PlacementError, place_replicas
from krust.controller.records import FENCE, BrokerRegistrationChangeRecord
from krust.controller.replication import fence_broker_updates, unfence_broker_updates

from .cluster_images import cluster, part, partition, replay, with_topic

TOPIC_ID = uuid.UUID(int=0x1234)
BROKERS = list(range(1, 7))


_REPLICAS = st.tuples(st.permutations(BROKERS), st.integers(1, 4)).map(
    lambda drawn: tuple(drawn[0][: drawn[1]])
)


@st.composite
def partitions(draw: st.DrawFn) -> PartitionImage:
    """A partition as the controller keeps it: distinct replicas (a reassignment in progress
    sometimes), a non-empty ISR of them, a leader in the ISR or none."""
    original = draw(_REPLICAS)
    reassignment = ReassignmentReplicas(original, (), ())
    if draw(st.booleans()):
        target = draw(_REPLICAS)
        reassignment = ReassignmentReplicas.between(original, target)
    replicas = reassignment.replicas
    isr = tuple(r for r in replicas if draw(st.booleans())) or (draw(st.sampled_from(replicas)),)
    leader = draw(st.sampled_from([*isr, NO_LEADER]))
    recovering = leader != NO_LEADER and len(isr) == 1 and draw(st.booleans())
    return PartitionImage(
        partition=draw(st.integers(0, 100)),
        leader=leader,
        leader_epoch=draw(st.integers(0, 1000)),
        partition_epoch=draw(st.integers(0, 1000)),
        replicas=replicas,
        isr=isr,
        removing_replicas=reassignment.removing,
        adding_replicas=reassignment.adding,
        leader_recovery_state=RECOVERING if recovering else RECOVERED,
    )


@st.composite
def changes(draw: st.DrawFn) -> tuple[PartitionImage, PartitionChangeBuilder, frozenset[int]]:
    """A partition and a builder with targets as the controller's callers set them: a target
    ISR of its replicas that keeps the leader while the leader can lead (only a fenced or
    shutting-down leader leaves the ISR), and any election."""
    current = draw(partitions())
    active = frozenset(draw(st.sets(st.sampled_from(BROKERS))))
    election = draw(st.sampled_from(Election))
    builder = PartitionChangeBuilder(current, TOPIC_ID, active.__contains__, election)
    target = [r for r in current.replicas if draw(st.booleans())]
    if current.leader in active and current.leader not in target:
        target.append(current.leader)
    builder.target_isr = tuple(target)
    if draw(st.booleans()) and current.leader_recovery_state == RECOVERING:
        builder.target_leader_recovery_state = RECOVERED  # the leader says it recovered
    return current, builder, active


@given(changes())
def test_a_partition_change_keeps_the_isr_and_leader_rules(
    change: tuple[PartitionImage, PartitionChangeBuilder, frozenset[int]],
) -> None:
    current, builder, active = change
    target_isr, election = builder.target_isr, builder.election
    record = builder.build()
    after = current if record is None else merge_partition_change(current, record)

    assert after.isr, "an ISR never becomes empty"
    assert len(set(after.isr)) == len(after.isr)
    assert len(set(after.replicas)) == len(after.replicas)
    assert set(after.isr) <= set(after.replicas)
    assert after.leader == NO_LEADER or after.leader in after.isr
    if after.leader != current.leader and after.leader != NO_LEADER:
        assert after.leader in active
    clean = after.leader in (NO_LEADER, current.leader) or after.leader in target_isr
    if not clean:
        assert election is Election.UNCLEAN, "an unclean election only where it is allowed"
        assert after.isr == (after.leader,)
        assert after.leader_recovery_state == RECOVERING
    elif after.leader_recovery_state == RECOVERING:
        assert current.leader_recovery_state == RECOVERING, "only an unclean election recovers"


@given(changes())
def test_epochs_rise_with_every_change_and_every_named_leader(
    change: tuple[PartitionImage, PartitionChangeBuilder, frozenset[int]],
) -> None:
    current, builder, _ = change
    record = builder.build()
    if record is None:
        return
    after = merge_partition_change(current, record)
    assert after.partition_epoch == current.partition_epoch + 1
    bumped = after.leader_epoch == current.leader_epoch + 1
    assert bumped or after.leader_epoch == current.leader_epoch
    if after.leader != current.leader:
        assert bumped
    if not set(current.replicas) <= set(after.replicas):
        assert bumped, "replicas that leave must stop fetching from this leader epoch"

    def state(p: PartitionImage) -> PartitionImage:
        return replace(p, leader_epoch=0, partition_epoch=0)

    assert state(after) != state(current), "a record that changes nothing"


@given(changes())
def test_a_reassignment_completes_once_its_targets_are_in_sync(
    change: tuple[PartitionImage, PartitionChangeBuilder, frozenset[int]],
) -> None:
    current, builder, _ = change
    reassignment = ReassignmentReplicas(
        current.replicas, current.adding_replicas, current.removing_replicas
    )
    targets = [r for r in current.replicas if r not in current.removing_replicas]
    done = reassignment.in_progress and set(targets) <= set(builder.target_isr)
    record = builder.build()
    after = current if record is None else merge_partition_change(current, record)
    if done:
        assert (after.replicas, after.adding_replicas, after.removing_replicas) == (
            tuple(targets),
            (),
            (),
        )
        assert not set(after.isr) & set(current.removing_replicas)
    else:
        assert after.replicas == current.replicas


@given(partitions(), st.sets(st.sampled_from(BROKERS)))
def test_a_preferred_election_picks_the_first_replica_when_it_can_lead(
    current: PartitionImage, active: set[int]
) -> None:
    builder = PartitionChangeBuilder(current, TOPIC_ID, active.__contains__, Election.PREFERRED)
    record = builder.build()
    after = current if record is None else merge_partition_change(current, record)
    preferred = current.replicas[0]
    if not current.reassigning and preferred in active and preferred in current.isr:
        assert after.leader == preferred


# -- fencing and unfencing a broker, over a whole image -----------------------------------------


@st.composite
def images(draw: st.DrawFn) -> tuple[MetadataImage, int, bool]:
    """A cluster of brokers 1-6 with a topic of up to 6 partitions, a broker to fence, and
    whether the topic allows unclean elections."""
    records = []
    for index in range(draw(st.integers(1, 6))):
        p = draw(partitions())
        records.append(
            partition(
                index,
                p.replicas,
                isr=p.isr,
                leader=p.leader,
                removing_replicas=p.removing_replicas,
                adding_replicas=p.adding_replicas,
            )
        )
    image = with_topic(cluster(brokers=BROKERS), *records)
    return image, draw(st.sampled_from(BROKERS)), draw(st.booleans())


def fence(image: MetadataImage, broker: int) -> MetadataImage:
    epoch = image.brokers[broker].epoch
    change = BrokerRegistrationChangeRecord(broker_id=broker, broker_epoch=epoch, fenced=FENCE)
    return replay(image, [change])


@given(images())
def test_a_fenced_broker_leaves_every_isr_but_a_last_one_and_leads_nothing(
    spec: tuple[MetadataImage, int, bool],
) -> None:
    image, fenced, unclean = spec
    before = image
    image = fence(image, fenced)
    image = replay(image, fence_broker_updates(image, fenced, lambda _topic: unclean))
    for index, old in before.topics["t"].partitions.items():
        new = part(image, index)
        assert new.leader != fenced
        assert fenced not in new.isr or new.isr == (fenced,) == old.isr
        assert new.leader == NO_LEADER or new.leader in new.isr
        if new.leader not in (NO_LEADER, old.leader) and new.leader not in old.isr:
            assert unclean
            assert new.leader_recovery_state == RECOVERING


@given(images())
def test_an_unfenced_broker_leads_its_leaderless_partitions_from_the_isr(
    spec: tuple[MetadataImage, int, bool],
) -> None:
    image, broker, unclean = spec
    image = fence(image, broker)
    image = replay(image, fence_broker_updates(image, broker, lambda _topic: False))
    leaderless = {i: p for i, p in image.topics["t"].partitions.items() if p.leader == NO_LEADER}
    image = replay(image, unfence_broker_updates(image, broker, lambda _topic: unclean))
    for index, old in leaderless.items():
        new = part(image, index)
        # Every ISR member can lead now: the others are active, `broker` is coming back. (The
        # ISR may shrink only by a reassignment that this change completes.)
        assert new.leader in old.isr
        assert new.leader in new.isr
        assert set(new.isr) <= set(old.isr)


# -- placement ----------------------------------------------------------------------------------

RACKS = st.dictionaries(
    st.integers(0, 40), st.none() | st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8
)


@given(RACKS, st.integers(1, 8), st.integers(0, 30), st.integers(0, 2**32))
def test_placement_spreads_distinct_replicas_over_racks(
    racks: dict[int, str | None], factor: int, count: int, seed: int
) -> None:
    if factor > len(racks):
        with pytest.raises(PlacementError):
            place_replicas(racks, count, factor, random.Random(seed))
        return
    placed = place_replicas(racks, count, factor, random.Random(seed))
    assert len(placed) == count
    rack_count = len(set(racks.values()))
    for replicas in placed:
        assert len(replicas) == factor
        assert len(set(replicas)) == factor
        assert set(replicas) <= set(racks)
        assert len({racks[r] for r in replicas}) == min(factor, rack_count)


@given(
    st.sets(st.integers(0, 40), min_size=1, max_size=8), st.integers(1, 3), st.integers(0, 2**32)
)
def test_placement_gives_each_broker_a_turn_to_lead(
    brokers: set[int], rounds: int, seed: int
) -> None:
    """Without racks, each run of as many partitions as brokers has every broker lead once."""
    factor = min(len(brokers), 3)
    placed = place_replicas(
        dict.fromkeys(brokers), rounds * len(brokers), factor, random.Random(seed)
    )
    leaders = Counter(replicas[0] for replicas in placed)
    assert leaders == Counter(dict.fromkeys(brokers, rounds))
    for start in range(0, len(placed), len(brokers)):
        assert {r[0] for r in placed[start : start + len(brokers)]} == brokers


@given(RACKS, st.integers(0, 2**32))
def test_placement_leaders_take_turns_over_racks(racks: dict[int, str | None], seed: int) -> None:
    """Leaders go round robin over the racks: in the first round of placements each rack leads
    as often as any other, give or take one."""
    placed = place_replicas(racks, len(racks), 1, random.Random(seed))
    per_rack = Counter(racks[replicas[0]] for replicas in placed)
    assert set(per_rack) == set(racks.values())
    assert max(per_rack.values()) - min(per_rack.values()) <= 1
