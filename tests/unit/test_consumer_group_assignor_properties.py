"""Properties of the KIP-848 server-side assignors (krust.group.consumer: `uniform` and `range`)
for generated groups: members, subscriptions (some to topics that do not exist), partition
counts, static members and current assignments (some corrupt: overlapping, beyond a topic's
partitions, of topics no longer subscribed). docs/consumer-group-assignors.md states the rules.

Both assignors: every partition of a subscribed topic is owned exactly once, only by a subscriber;
every member gets an answer; the answer does not depend on the order members are listed in.

`uniform`: identical subscriptions give counts that differ by at most one; with different ones no
partition could move to a subscriber of its topic holding two or more fewer (Kafka's
heterogeneous builder's promise), so members with identical subscriptions still differ by at
most one. Sticky: its own answer is a fixed point; with identical subscriptions a member keeps
its current partitions up to its quota, the extra partitions go first to members that hold them,
so exactly the partitions that must move do (no member both loses and gains one), and after one
member joins or leaves the others only lose, or only gain.

`range`: per topic, contiguous ranges in member order (static members first, by instance id),
sizes differing by at most one, larger first; co-partitioned topics give each member the same
partition numbers; the current assignment is not read, and a static member that rejoins under a
new member id gets its ranges back.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from krust.group.consumer.assignor import (
    GroupSpec,
    MemberAssignments,
    MemberSubscription,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
)

uniform = UniformAssignor()
range_assignor = RangeAssignor()

Topics = dict[uuid.UUID, TopicMetadata]
MEMBER_ID = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=6)
MEMBER_IDS = st.lists(MEMBER_ID, max_size=7, unique=True)
# An id no generated member has (the alphabet above has no "!"), anywhere in member id order.
NEW_MEMBER_ID = MEMBER_ID.map(lambda member_id: member_id + "!")


_TOPIC_IDS = st.lists(st.uuids(), min_size=1, max_size=4, unique=True)
_PARTITION_COUNTS = st.lists(st.integers(1, 12), min_size=4, max_size=4)
_SUBSET = st.integers(0, 2**5 - 1)  # a bit per topic id: the 4 topics and a deleted one
_CURRENT = st.lists(st.tuples(_SUBSET, st.frozensets(st.integers(0, 14), max_size=6)), max_size=3)
_INSTANCE = st.none() | st.sampled_from(["i1", "i2", "i3", "i4"])
DELETED_TOPIC = uuid.UUID(int=0xDE1E7ED)


@st.composite
def groups(
    draw: st.DrawFn, homogeneous: bool = False, valid: bool = False
) -> tuple[GroupSpec, Topics]:
    """A group and its topics (1-4, with 1-12 partitions; members may subscribe to one that
    does not exist too). `homogeneous`: every member subscribes to the same topics. `valid`:
    current assignments as Kafka keeps them (disjoint, subscribed, existing partitions);
    otherwise anything, which the assignors must clean up."""
    ids = draw(_TOPIC_IDS)
    counts = draw(_PARTITION_COUNTS)
    topics = {
        t: TopicMetadata(f"t{i}", n) for i, (t, n) in enumerate(zip(ids, counts, strict=False))
    }
    known = [*ids, DELETED_TOPIC]

    def subset(bits: int) -> frozenset[uuid.UUID]:
        return frozenset(t for i, t in enumerate(known) if bits >> i & 1)

    common = subset(draw(_SUBSET))
    members = {}
    instances: set[str] = set()
    owners: set[tuple[uuid.UUID, int]] = set()
    for member_id in draw(MEMBER_IDS):
        subscribed = common if homogeneous else subset(draw(_SUBSET))
        current: dict[uuid.UUID, frozenset[int]] = {}
        for bits, partitions in draw(_CURRENT):
            for topic_id in subset(bits):
                if valid:
                    if topic_id not in subscribed or topic_id not in topics:
                        continue
                    partitions = frozenset(
                        p
                        for p in partitions
                        if p < topics[topic_id].partitions and (topic_id, p) not in owners
                    )
                    owners.update((topic_id, p) for p in partitions)
                if partitions:
                    current[topic_id] = partitions
        # Instance ids are unique within a group.
        instance = draw(_INSTANCE)
        if instance in instances:
            instance = None
        if instance is not None:
            instances.add(instance)
        members[member_id] = MemberSubscription(subscribed, current, instance_id=instance)
    return GroupSpec(members), topics


def subscribed_existing(group: GroupSpec, topics: Topics, member_id: str) -> frozenset[uuid.UUID]:
    return group.members[member_id].subscribed_topic_ids & frozenset(topics)


def loads(result: MemberAssignments) -> dict[str, int]:
    return {m: sum(len(parts) for parts in a.values()) for m, a in result.items()}


def owned(assignment: Mapping[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}


def assert_every_partition_owned_once_by_a_subscriber(
    group: GroupSpec, topics: Topics, result: MemberAssignments
) -> None:
    assert set(result) == set(group.members)
    counts: Counter[tuple[uuid.UUID, int]] = Counter()
    for member_id, assignment in result.items():
        assert set(assignment) <= subscribed_existing(group, topics, member_id)
        assert all(assignment.values()), "a topic with no partition is left out"
        counts.update(owned(assignment))
    subscribed = {t for m in group.members for t in subscribed_existing(group, topics, m)}
    expected = {(t, p) for t in subscribed for p in range(topics[t].partitions)}
    assert set(counts) == expected
    assert set(counts.values()) <= {1}


def with_current(group: GroupSpec, result: MemberAssignments) -> GroupSpec:
    return GroupSpec(
        {
            member_id: MemberSubscription(
                member.subscribed_topic_ids, result[member_id], member.instance_id
            )
            for member_id, member in group.members.items()
        }
    )


# -- both assignors -----------------------------------------------------------------------------


@given(groups(), st.sampled_from([uniform, range_assignor]), st.randoms())
def test_every_subscribed_partition_is_owned_once_whatever_the_member_order(
    spec: tuple[GroupSpec, Topics], assignor: Any, random: Any
) -> None:
    group, topics = spec
    result = assignor.assign(group, topics)
    assert_every_partition_owned_once_by_a_subscriber(group, topics, result)
    shuffled = list(group.members.items())
    random.shuffle(shuffled)
    assert assignor.assign(GroupSpec(dict(shuffled)), topics) == result


# -- uniform ------------------------------------------------------------------------------------


@given(groups(homogeneous=True))
def test_uniform_balances_identical_subscriptions_to_within_one(
    spec: tuple[GroupSpec, Topics],
) -> None:
    group, topics = spec
    counts = loads(uniform.assign(group, topics)).values()
    assert not counts or max(counts) - min(counts) <= 1


@given(groups())
def test_uniform_leaves_no_partition_that_could_move_to_a_subscriber_two_fewer(
    spec: tuple[GroupSpec, Topics],
) -> None:
    group, topics = spec
    result = uniform.assign(group, topics)
    load = loads(result)
    for member_id, assignment in result.items():
        for topic_id in assignment:
            for other in group.members:
                if topic_id in subscribed_existing(group, topics, other):
                    assert load[member_id] - load[other] <= 1, (member_id, other, topic_id)
    by_subscription: dict[frozenset[uuid.UUID], list[int]] = {}
    for member_id in group.members:
        key = subscribed_existing(group, topics, member_id)
        by_subscription.setdefault(key, []).append(load[member_id])
    for counts in by_subscription.values():
        assert max(counts) - min(counts) <= 1


@given(groups())
def test_uniform_answer_is_a_fixed_point(spec: tuple[GroupSpec, Topics]) -> None:
    """An assignment that is already the target never moves (KAFKA-18688 for the homogeneous
    builder; the heterogeneous one keeps everything, then finds nothing to balance)."""
    group, topics = spec
    result = uniform.assign(group, topics)
    assert uniform.assign(with_current(group, result), topics) == result


def _fewest_moves(group: GroupSpec, topics: Topics) -> int:
    """How many currently owned partitions must change owner to reach a balanced assignment
    of identical subscriptions: members keep up to their quota, and the extra partitions
    (total % members) are quotas of members holding more than the minimum."""
    members = list(group.members)
    held = [len(owned(group.members[m].assignment)) for m in members]
    subscribed = subscribed_existing(group, topics, members[0])
    total = sum(topics[t].partitions for t in subscribed)
    minimum, extra = divmod(total, len(members))
    quotas = [minimum] * len(members)
    for index in sorted(range(len(members)), key=lambda i: -held[i])[:extra]:
        quotas[index] += 1
    return sum(held) - sum(min(h, q) for h, q in zip(held, quotas, strict=True))


@given(groups(homogeneous=True, valid=True))
def test_uniform_moves_only_the_partitions_that_must_move(spec: tuple[GroupSpec, Topics]) -> None:
    group, topics = spec
    if not group.members:
        return
    result = uniform.assign(group, topics)
    moved = 0
    for member_id, member in group.members.items():
        before, after = owned(member.assignment), owned(result[member_id])
        assert before <= after or after <= before, "a member both lost and gained partitions"
        moved += len(before - after)
    assert moved == _fewest_moves(group, topics)


@given(groups(homogeneous=True), NEW_MEMBER_ID)
def test_uniform_after_a_member_joins_the_others_only_lose(
    spec: tuple[GroupSpec, Topics], newcomer: str
) -> None:
    group, topics = spec
    if not group.members:
        return
    balanced = with_current(group, uniform.assign(group, topics))
    subscribed = next(iter(group.members.values())).subscribed_topic_ids
    joined = GroupSpec({**balanced.members, newcomer: MemberSubscription(subscribed, {})})
    result = uniform.assign(joined, topics)
    taken = 0
    for member_id, member in balanced.members.items():
        before, after = owned(member.assignment), owned(result[member_id])
        assert after <= before
        taken += len(before - after)
    assert taken == len(owned(result[newcomer]))


@given(groups(homogeneous=True), st.data())
def test_uniform_after_a_member_leaves_the_others_only_gain(
    spec: tuple[GroupSpec, Topics], data: st.DataObject
) -> None:
    group, topics = spec
    if len(group.members) < 2:
        return
    balanced = with_current(group, uniform.assign(group, topics))
    leaving = data.draw(st.sampled_from(sorted(group.members)), label="leaves")
    remaining = GroupSpec({m: s for m, s in balanced.members.items() if m != leaving})
    result = uniform.assign(remaining, topics)
    for member_id, member in remaining.members.items():
        assert owned(member.assignment) <= owned(result[member_id])


# -- range --------------------------------------------------------------------------------------


def _range_order(group: GroupSpec) -> list[str]:
    """Static members first by instance id, then the others by member id."""
    static = sorted(
        (m for m, s in group.members.items() if s.instance_id is not None),
        key=lambda m: group.members[m].instance_id or "",
    )
    return static + sorted(m for m, s in group.members.items() if s.instance_id is None)


@given(groups())
def test_range_gives_contiguous_ranges_in_member_order(spec: tuple[GroupSpec, Topics]) -> None:
    group, topics = spec
    result = range_assignor.assign(group, topics)
    assert_every_partition_owned_once_by_a_subscriber(group, topics, result)
    order = _range_order(group)
    for topic_id in topics:
        ranges = [
            sorted(result[m].get(topic_id, ()))
            for m in order
            if topic_id in subscribed_existing(group, topics, m)
        ]
        if not ranges:
            continue
        assert [p for r in ranges for p in r] == list(range(topics[topic_id].partitions))
        sizes = [len(r) for r in ranges]
        assert sizes == sorted(sizes, reverse=True)
        assert sizes[0] - sizes[-1] <= 1


@given(groups())
def test_range_co_partitions_topics_with_the_same_subscribers_and_size(
    spec: tuple[GroupSpec, Topics],
) -> None:
    group, topics = spec
    result = range_assignor.assign(group, topics)

    def subscribers(topic_id: uuid.UUID) -> frozenset[str]:
        return frozenset(
            m for m in group.members if topic_id in subscribed_existing(group, topics, m)
        )

    for first, second in itertools.combinations(topics, 2):
        if subscribers(first) == subscribers(second) and (
            topics[first].partitions == topics[second].partitions
        ):
            for member_id in subscribers(first):
                assert result[member_id].get(first) == result[member_id].get(second)


@given(groups(), groups())
def test_range_does_not_read_the_current_assignment(
    spec: tuple[GroupSpec, Topics], other: tuple[GroupSpec, Topics]
) -> None:
    group, topics = spec
    other_group, _ = other
    elsewhere = list(other_group.members.values())
    moved = GroupSpec(
        {
            member_id: MemberSubscription(
                member.subscribed_topic_ids,
                elsewhere[index % len(elsewhere)].assignment if elsewhere else {},
                member.instance_id,
            )
            for index, (member_id, member) in enumerate(group.members.items())
        }
    )
    assert range_assignor.assign(moved, topics) == range_assignor.assign(group, topics)


@given(groups(), st.data())
def test_range_gives_a_rejoining_static_member_its_ranges_back(
    spec: tuple[GroupSpec, Topics], data: st.DataObject
) -> None:
    group, topics = spec
    static = sorted(m for m, s in group.members.items() if s.instance_id is not None)
    if not static:
        return
    rejoining = data.draw(st.sampled_from(static), label="rejoins")
    rejoined = GroupSpec(
        {
            (member_id + "!" if member_id == rejoining else member_id): member
            for member_id, member in group.members.items()
        }
    )
    before = range_assignor.assign(group, topics)
    after = range_assignor.assign(rejoined, topics)
    assert after[rejoining + "!"] == before[rejoining]
