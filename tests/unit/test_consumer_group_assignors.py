"""The KIP-848 server-side assignors `uniform` and `range`.

The worked examples are Kafka's own (UniformHomogeneousAssignmentBuilderTest,
UniformHeterogeneousAssignmentBuilderTest, RangeAssignorTest), with Kafka's topic ids. Where
Kafka's homogeneous builder walks a hash set of topics, krust walks topics in id order; the few
examples whose expected answer depends on that order say so and give krust's answer.
"""

import random
import uuid
from collections.abc import Mapping

import pytest
from krust.group.consumer.assignor import (
    ASSIGNORS,
    GroupSpec,
    MemberSubscription,
    PartitionAssignor,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
)
from krust.group.consumer.uniform_heterogeneous import assign_heterogeneous

# Kafka's test topic ids ("T1-A4s3VTwiI5CTbEp6POw" ... in Kafka's base64), in Kafka's order.
TOPIC_IDS = {
    "t1": uuid.UUID("4f5f80e2-cdd5-4f08-88e4-24db129e8f3b"),
    "t2": uuid.UUID("4f6f81e2-cdd5-4f08-88e5-81db3e9e9851"),
    "t3": uuid.UUID("4f7f8253-c7d5-4cb0-b3e5-83242e80d0b1"),
    "t4": uuid.UUID("4f8f93c3-d7d5-4cb0-b3e4-76cfa7a610b1"),
}
TOPIC_NAMES = {topic_id: name for name, topic_id in TOPIC_IDS.items()}

Named = dict[str, dict[str, list[int]]]
"""member id -> topic name -> sorted partitions: the assertions' readable form."""


def member(
    topics: str = "", current: Mapping[str, list[int]] | None = None, instance: str | None = None
) -> MemberSubscription:
    return MemberSubscription(
        subscribed_topic_ids=frozenset(TOPIC_IDS[t] for t in topics.split()),
        assignment={TOPIC_IDS[t]: frozenset(p) for t, p in (current or {}).items()},
        instance_id=instance,
    )


def run(
    assignor: PartitionAssignor,
    partitions: Mapping[str, int],
    members: Mapping[str, MemberSubscription],
) -> Named:
    topics = {TOPIC_IDS[name]: TopicMetadata(name, count) for name, count in partitions.items()}
    result = assignor.assign(GroupSpec(members), topics)
    assert set(result) == set(members)
    return {
        member_id: {TOPIC_NAMES[t]: sorted(parts) for t, parts in assignment.items()}
        for member_id, assignment in result.items()
    }


uniform = UniformAssignor()
range_assignor = RangeAssignor()


def test_registry_has_kafkas_two_assignors_by_name() -> None:
    assert set(ASSIGNORS) == {"uniform", "range"}
    assert all(name == assignor.name for name, assignor in ASSIGNORS.items())


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=["uniform", "range"])
def test_no_members_and_members_subscribed_to_nothing(assignor: PartitionAssignor) -> None:
    assert run(assignor, {"t1": 3}, {}) == {}
    assert run(assignor, {"t1": 3}, {"A": member(), "B": member()}) == {"A": {}, "B": {}}
    # One member subscribed to nothing beside one that is: the topic goes to the subscriber.
    assert run(assignor, {"t1": 3}, {"A": member("t1"), "B": member()}) == {
        "A": {"t1": [0, 1, 2]},
        "B": {},
    }


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=["uniform", "range"])
def test_deleted_or_unknown_topic_is_ignored(assignor: PartitionAssignor) -> None:
    # Kafka never hands an assignor a topic missing from the metadata image.
    assert run(assignor, {"t1": 3}, {"A": member("t2")}) == {"A": {}}
    # t2 was deleted: its partitions leave the assignment, the group stays homogeneous.
    members = {
        "A": member("t1 t2", {"t1": [0], "t2": [0, 1]}),
        "B": member("t1 t2", {"t1": [1, 2], "t2": [2]}),
    }
    result = run(assignor, {"t1": 4}, members)
    assert {t for assignment in result.values() for t in assignment} == {"t1"}
    assert sorted(p for assignment in result.values() for p in assignment["t1"]) == [0, 1, 2, 3]


# --- uniform, homogeneous subscriptions (UniformHomogeneousAssignmentBuilderTest) ---


def test_uniform_first_assignment_two_members_two_topics() -> None:
    members = {"A": member("t1 t3"), "B": member("t1 t3")}
    # Kafka's hash set yields t3 first (A: t3 0-1, B: t1 0-2); in id order t1 comes first.
    assert run(uniform, {"t1": 3, "t3": 2}, members) == {
        "A": {"t1": [0, 1]},
        "B": {"t1": [2], "t3": [0, 1]},
    }


def test_uniform_more_members_than_partitions_leaves_the_first_member_empty() -> None:
    members = {"A": member("t3"), "B": member("t3"), "C": member("t3")}
    assert run(uniform, {"t3": 2}, members) == {"A": {}, "B": {"t3": [0]}, "C": {"t3": [1]}}


def test_uniform_rebalances_an_unbalanced_previous_assignment() -> None:
    members = {
        "A": member("t1 t2", {"t1": [0, 1], "t2": [0, 1]}),
        "B": member("t1 t2", {"t1": [2], "t2": [2]}),
    }
    assert run(uniform, {"t1": 3, "t2": 3}, members) == {
        "A": {"t1": [0, 1], "t2": [0]},
        "B": {"t1": [2], "t2": [1, 2]},
    }


def test_uniform_partitions_added_go_to_members_below_quota() -> None:
    members = {
        "A": member("t1 t2", {"t1": [0, 2], "t2": [0]}),
        "B": member("t1 t2", {"t1": [1], "t2": [1, 2]}),
    }
    # Both keep all they had. Kafka's hash-set order hands A t2 3-4 and B t1 3-5.
    assert run(uniform, {"t1": 6, "t2": 5}, members) == {
        "A": {"t1": [0, 2, 3, 4], "t2": [0]},
        "B": {"t1": [1, 5], "t2": [1, 2, 3, 4]},
    }


def test_uniform_member_joins_taking_only_the_surplus() -> None:
    members = {
        "A": member("t1 t2", {"t1": [0, 2], "t2": [0]}),
        "B": member("t1 t2", {"t1": [1], "t2": [1, 2]}),
        "C": member("t1 t2"),
    }
    assert run(uniform, {"t1": 3, "t2": 3}, members) == {
        "A": {"t1": [0, 2]},
        "B": {"t1": [1], "t2": [1]},
        "C": {"t2": [0, 2]},
    }


def test_uniform_member_leaves_and_the_others_keep_theirs() -> None:
    members = {
        "A": member("t1 t2", {"t1": [0], "t2": [0]}),
        "B": member("t1 t2", {"t1": [1], "t2": [1]}),
    }
    # C left holding t1-2 and t2-2. Kafka's hash-set order gives A t2-2 and B t1-2.
    assert run(uniform, {"t1": 3, "t2": 3}, members) == {
        "A": {"t1": [0, 2], "t2": [0]},
        "B": {"t1": [1], "t2": [1, 2]},
    }


def test_uniform_unsubscribed_topic_is_revoked() -> None:
    members = {
        "A": member("t2", {"t1": [0], "t2": [0]}),
        "B": member("t2", {"t1": [1], "t2": [1]}),
    }
    assert run(uniform, {"t1": 2, "t2": 2}, members) == {"A": {"t2": [0]}, "B": {"t2": [1]}}


def test_uniform_balanced_assignment_does_not_move_whoever_holds_the_extra_partition() -> None:
    # KAFKA-18688: 7 partitions over 3 members; C (last in member order) holds the extra one.
    members = {
        "A": member("t1", {"t1": [0, 1]}),
        "B": member("t1", {"t1": [2, 3]}),
        "C": member("t1", {"t1": [4, 5, 6]}),
    }
    assert run(uniform, {"t1": 7}, members) == {
        "A": {"t1": [0, 1]},
        "B": {"t1": [2, 3]},
        "C": {"t1": [4, 5, 6]},
    }


def test_uniform_stickiness_when_a_member_joins_and_leaves() -> None:
    three = {m: member("t1") for m in "ABC"}
    first = run(uniform, {"t1": 12}, three)
    assert [len(first[m]["t1"]) for m in "ABC"] == [4, 4, 4]

    joined = {m: member("t1", first[m]) for m in "ABC"} | {"D": member("t1")}
    second = run(uniform, {"t1": 12}, joined)
    for m in "ABC":
        # Each keeps 3 of its 4; only the three surplus partitions move, to D.
        assert len(second[m]["t1"]) == 3
        assert set(second[m]["t1"]) <= set(first[m]["t1"])
    assert len(second["D"]["t1"]) == 3

    left = {m: member("t1", second[m]) for m in "ABD"}
    third = run(uniform, {"t1": 12}, left)
    for m in "ABD":
        assert set(second[m]["t1"]) <= set(third[m]["t1"])
    assert sorted(p for m in "ABD" for p in third[m]["t1"]) == list(range(12))


def test_uniform_partition_count_grows_and_shrinks() -> None:
    members = {m: member("t1", {"t1": [i, i + 3]}) for i, m in enumerate("ABC")}
    grown = run(uniform, {"t1": 9}, members)
    for i, m in enumerate("ABC"):
        assert grown[m]["t1"][:2] == [i, i + 3]
        assert len(grown[m]["t1"]) == 3
    # A topic recreated smaller: partitions beyond its count are gone.
    shrunk = run(uniform, {"t1": 4}, members)
    assert sorted(p for m in "ABC" for p in shrunk[m].get("t1", [])) == [0, 1, 2, 3]
    assert shrunk["A"]["t1"][0] == 0 and shrunk["B"]["t1"][0] == 1 and shrunk["C"]["t1"][0] == 2


def test_uniform_partition_claimed_twice_is_assigned_once() -> None:
    # A corrupt current assignment: A and B both claim t1-1. A (first in member order) keeps
    # it, then gives it up to balance the group; t1-1 is assigned once all the same.
    members = {"A": member("t1", {"t1": [0, 1]}), "B": member("t1", {"t1": [1]})}
    assert run(uniform, {"t1": 2}, members) == {"A": {"t1": [0]}, "B": {"t1": [1]}}


# --- uniform, heterogeneous subscriptions (UniformHeterogeneousAssignmentBuilderTest) ---


def test_uniform_heterogeneous_first_assignment() -> None:
    members = {"A": member("t1 t3"), "B": member("t3")}
    assert run(uniform, {"t1": 3, "t3": 6}, members) == {
        "A": {"t1": [0, 1, 2], "t3": [4]},
        "B": {"t3": [0, 1, 2, 3, 5]},
    }


def test_uniform_heterogeneous_more_members_than_partitions() -> None:
    members = {"A": member("t3"), "B": member("t3"), "C": member("t1")}
    assert run(uniform, {"t3": 1, "t1": 2}, members) == {
        "A": {"t3": [0]},
        "B": {},
        "C": {"t1": [0, 1]},
    }


def test_uniform_heterogeneous_rebalances_an_unbalanced_previous_assignment() -> None:
    members = {
        "A": member("t1", {"t1": [0, 1, 2]}),
        "B": member("t1 t2", {"t1": [3], "t2": [0]}),
        "C": member("t1 t2 t3", {"t1": [4, 5], "t2": [1, 2, 3], "t3": [0, 1, 2, 3]}),
    }
    assert run(uniform, {"t1": 6, "t2": 4, "t3": 4}, members) == {
        "A": {"t1": [0, 1, 2, 5]},
        "B": {"t1": [3], "t2": [0, 1, 2, 3]},
        "C": {"t1": [4], "t3": [0, 1, 2, 3]},
    }


def test_uniform_heterogeneous_partitions_added() -> None:
    members = {
        "A": member("t1 t3", {"t1": [0, 1, 2, 3], "t3": [0, 1]}),
        "B": member("t1 t2 t3 t4", {"t2": [0, 1, 2], "t4": [0, 1, 2]}),
    }
    assert run(uniform, {"t1": 6, "t2": 5, "t3": 3, "t4": 3}, members) == {
        "A": {"t1": [0, 1, 2, 3, 4, 5], "t3": [0, 1, 2]},
        "B": {"t2": [0, 1, 2, 3, 4], "t4": [0, 1, 2]},
    }


def test_uniform_heterogeneous_member_joins_and_partitions_added() -> None:
    members = {
        "A": member("t1", {"t1": [0, 2], "t2": [0]}),
        "B": member("t1 t2", {"t1": [1], "t2": [1, 2]}),
        "C": member("t1 t2"),
    }
    assert run(uniform, {"t1": 6, "t2": 7}, members) == {
        "A": {"t1": [0, 2, 3, 4, 5]},
        "B": {"t1": [1], "t2": [1, 2, 6]},
        "C": {"t2": [0, 3, 4, 5]},
    }


def test_uniform_heterogeneous_member_leaves() -> None:
    members = {
        "A": member("t1 t3", {"t1": [0, 1, 2], "t3": [0, 1]}),
        "B": member("t2", {"t2": [3, 4, 5, 6]}),
    }
    assert run(uniform, {"t1": 3, "t2": 8, "t3": 3}, members) == {
        "A": {"t1": [0, 1, 2], "t3": [0, 1, 2]},
        "B": {"t2": [0, 1, 2, 3, 4, 5, 6, 7]},
    }


def test_uniform_heterogeneous_subscription_removed() -> None:
    members = {
        "A": member("t1", {"t1": [0, 2], "t2": [1, 3]}),
        "B": member("t1 t2", {"t1": [1], "t2": [0, 2, 4]}),
    }
    assert run(uniform, {"t1": 3, "t2": 5}, members) == {
        "A": {"t1": [0, 1, 2]},
        "B": {"t2": [0, 1, 2, 3, 4]},
    }


def test_uniform_heterogeneous_partitions_run_out_before_balance() -> None:
    # Kafka's edge case: the least loaded subscriber starts with none of a topic's partitions.
    # Same subscriptions, so the assignor itself would use the homogeneous path; Kafka's test
    # drives the heterogeneous builder directly, and so does this one.
    members = {
        "A": member("t1 t2 t3", {"t1": [0, 1], "t2": [0, 1], "t3": [0, 1]}),
        "B": member("t1 t2 t3"),
    }
    topics = {TOPIC_IDS[t]: TopicMetadata(t, 2) for t in ("t1", "t2", "t3")}
    subscriptions = {m: s.subscribed_topic_ids for m, s in members.items()}
    result = assign_heterogeneous(["A", "B"], subscriptions, GroupSpec(members), topics)
    assert result == {
        "A": {TOPIC_IDS["t2"]: frozenset({0}), TOPIC_IDS["t3"]: frozenset({0, 1})},
        "B": {TOPIC_IDS["t1"]: frozenset({0, 1}), TOPIC_IDS["t2"]: frozenset({1})},
    }
    # The homogeneous path keeps A's first three and hands B the rest.
    assert run(uniform, {"t1": 2, "t2": 2, "t3": 2}, members) == {
        "A": {"t1": [0, 1], "t2": [0]},
        "B": {"t2": [1], "t3": [0, 1]},
    }


# --- range (RangeAssignorTest) ---


def test_range_first_assignment_same_subscriptions_is_co_partitioned() -> None:
    members = {"A": member("t1 t3"), "B": member("t1 t3")}
    assert run(range_assignor, {"t1": 3, "t3": 2}, members) == {
        "A": {"t1": [0, 1], "t3": [0]},
        "B": {"t1": [2], "t3": [1]},
    }


def test_range_first_assignment_different_subscriptions() -> None:
    members = {"A": member("t1 t2"), "B": member("t3"), "C": member("t2 t3")}
    assert run(range_assignor, {"t1": 3, "t2": 3, "t3": 2}, members) == {
        "A": {"t1": [0, 1, 2], "t2": [0, 1]},
        "B": {"t3": [0]},
        "C": {"t2": [2], "t3": [1]},
    }


def test_range_more_members_than_partitions() -> None:
    members = {m: member("t1 t3") for m in "ABC"}
    assert run(range_assignor, {"t1": 3, "t3": 2}, members) == {
        "A": {"t1": [0], "t3": [0]},
        "B": {"t1": [1], "t3": [1]},
        "C": {"t1": [2]},
    }


def test_range_static_member_rejoining_under_a_new_id_gets_its_ranges_back() -> None:
    before = run(
        range_assignor,
        {"t1": 5},
        {
            "A": member("t1", instance="instanceA"),
            "C": member("t1", instance="instanceC"),
            "B": member("t1"),
        },
    )
    # Static members first, by instance id, then dynamic members by member id.
    assert before == {"A": {"t1": [0, 1]}, "C": {"t1": [2, 3]}, "B": {"t1": [4]}}
    after = run(
        range_assignor,
        {"t1": 5},
        {
            "memberA1": member("t1", instance="instanceA"),
            "C": member("t1", instance="instanceC"),
            "B": member("t1"),
        },
    )
    assert after == {"memberA1": before["A"], "C": before["C"], "B": before["B"]}


def test_range_is_recomputed_from_member_order_not_from_the_current_assignment() -> None:
    # Kafka 4.x's server-side range assignor ignores the current assignment (KAFKA-16944); a
    # member joining is test_docs_example_member_joins.
    swapped = {"A": member("t1", {"t1": [1]}), "B": member("t1", {"t1": [0]})}
    assert run(range_assignor, {"t1": 2}, swapped) == {"A": {"t1": [0]}, "B": {"t1": [1]}}
    more_members = {
        "A": member("t1 t2", {"t1": [0], "t2": [0]}),
        "B": member("t1 t2", {"t1": [1], "t2": [1]}),
        "C": member("t1 t2"),
    }
    assert run(range_assignor, {"t1": 2, "t2": 2}, more_members) == {
        "A": {"t1": [0], "t2": [0]},
        "B": {"t1": [1], "t2": [1]},
        "C": {},
    }
    left = {"B": member("t1 t2", {"t1": [2], "t2": [2]})}
    assert run(range_assignor, {"t1": 3, "t2": 3}, left) == {
        "B": {"t1": [0, 1, 2], "t2": [0, 1, 2]}
    }


def test_range_partition_added_and_member_joins() -> None:
    members = {
        "A": member("t1 t2", {"t1": [0, 1], "t2": [0, 1]}),
        "B": member("t1 t2", {"t1": [2], "t2": [2]}),
    }
    assert run(range_assignor, {"t1": 4, "t2": 4}, members) == {
        "A": {"t1": [0, 1], "t2": [0, 1]},
        "B": {"t1": [2, 3], "t2": [2, 3]},
    }
    members["C"] = member("t1")
    assert run(range_assignor, {"t1": 4, "t2": 3}, members) == {
        "A": {"t1": [0, 1], "t2": [0, 1]},
        "B": {"t1": [2], "t2": [2]},
        "C": {"t1": [3]},
    }


def test_range_subscriptions_changed() -> None:
    members = {
        "A": member("t1", {"t1": [0, 1, 2], "t2": [0]}),
        "B": member("t1 t2 t3", {"t2": [1]}),
        "C": member("t2", {"t2": [2], "t3": [0, 1]}),
    }
    assert run(range_assignor, {"t1": 3, "t2": 3, "t3": 2}, members) == {
        "A": {"t1": [0, 1]},
        "B": {"t1": [2], "t2": [0, 1], "t3": [0, 1]},
        "C": {"t2": [2]},
    }


# --- determinism and randomized properties ---


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=["uniform", "range"])
def test_same_input_in_any_order_gives_the_same_assignment(assignor: PartitionAssignor) -> None:
    members = {
        "C": member("t1 t2", {"t2": [0, 1]}, instance="i0"),
        "A": member("t2 t3", {"t3": [2]}),
        "B": member("t1 t3", {"t1": [3]}),
    }
    partitions = {"t3": 4, "t1": 5, "t2": 3}
    expected = run(assignor, partitions, members)
    for _ in range(5):
        shuffled_members = dict(random.Random(7).sample(sorted(members.items()), len(members)))
        shuffled_topics = dict(reversed(list(partitions.items())))
        assert run(assignor, shuffled_topics, shuffled_members) == expected


@pytest.mark.parametrize("subscriptions", ["t1 t2", "mixed"])
def test_uniform_is_stable_once_balanced(subscriptions: str) -> None:
    # Kafka's CommonAssignorTests: assigning again from the result changes nothing.
    topics = "t1 t2 t3"
    members = {
        m: member(topics if subscriptions != "mixed" else " ".join(topics.split()[: i + 1]))
        for i, m in enumerate("ABC")
    }
    partitions = {"t1": 2, "t2": 5, "t3": 7}
    first = run(uniform, partitions, members)
    rerun = {
        m: MemberSubscription(
            sub.subscribed_topic_ids,
            {TOPIC_IDS[t]: frozenset(p) for t, p in first[m].items()},
        )
        for m, sub in members.items()
    }
    assert run(uniform, partitions, rerun) == first


def random_group(rng: random.Random) -> tuple[dict[str, int], dict[str, MemberSubscription]]:
    names = list(TOPIC_IDS)[: rng.randint(1, 4)]
    partitions = {name: rng.randint(0, 12) for name in names}
    homogeneous = rng.random() < 0.5
    shared = [t for t in TOPIC_IDS if rng.random() < 0.7]
    members: dict[str, MemberSubscription] = {}
    for index in range(rng.randint(0, 7)):
        subscribed = shared if homogeneous else [t for t in TOPIC_IDS if rng.random() < 0.5]
        # Current assignments: sometimes stale, overlapping or beyond the partition count.
        current = {
            t: rng.sample(range(14), rng.randint(0, 5)) for t in TOPIC_IDS if rng.random() < 0.5
        }
        members[f"m{index}"] = member(" ".join(subscribed), current)
    return partitions, members


def check_complete(
    named: Named, partitions: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> None:
    """Every partition of a topic with a subscriber is assigned exactly once, to a subscriber;
    nothing else is assigned."""
    owners: dict[tuple[str, int], str] = {}
    for member_id, assignment in named.items():
        for topic, parts in assignment.items():
            assert TOPIC_IDS[topic] in members[member_id].subscribed_topic_ids
            assert parts, "a topic without partitions is omitted"
            for p in parts:
                assert (topic, p) not in owners
                owners[(topic, p)] = member_id
    expected = {
        (topic, p)
        for topic, count in partitions.items()
        if any(TOPIC_IDS[topic] in m.subscribed_topic_ids for m in members.values())
        for p in range(count)
    }
    assert set(owners) == expected


def loads(named: Named) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in named.items()}


def test_randomized_groups_are_fully_and_validly_assigned() -> None:
    rng = random.Random(848)
    for _ in range(400):
        partitions, members = random_group(rng)
        for assignor in (uniform, range_assignor):
            check_complete(run(assignor, partitions, members), partitions, members)


def test_randomized_uniform_balance() -> None:
    rng = random.Random(4848)
    for _ in range(400):
        partitions, members = random_group(rng)
        named = run(uniform, partitions, members)
        load = loads(named)
        subscriptions = {
            m: frozenset(t for t in s.subscribed_topic_ids if TOPIC_NAMES[t] in partitions)
            for m, s in members.items()
        }
        if len(set(subscriptions.values())) <= 1:
            assert not load or max(load.values()) - min(load.values()) <= 1
            continue
        # Heterogeneous: no partition can move to a subscriber with two or more fewer.
        for giver, assignment in named.items():
            for topic in assignment:
                for taker, subscribed in subscriptions.items():
                    if TOPIC_IDS[topic] in subscribed:
                        assert load[giver] - load[taker] <= 1


def test_randomized_uniform_keeps_a_balanced_assignment() -> None:
    rng = random.Random(1848)
    for _ in range(200):
        partitions, members = random_group(rng)
        first = run(uniform, partitions, members)
        rerun = {
            m: MemberSubscription(
                s.subscribed_topic_ids, {TOPIC_IDS[t]: frozenset(p) for t, p in first[m].items()}
            )
            for m, s in members.items()
        }
        assert run(uniform, partitions, rerun) == first


def test_docs_example_member_joins() -> None:
    # docs/consumer-group-assignors.md: uniform moves A's surplus, range recomputes the ranges.
    members = {
        "A": member("t1 t2", {"t1": [0, 1], "t2": [0, 1]}),
        "B": member("t1 t2", {"t1": [2], "t2": [2]}),
        "C": member("t1 t2"),
    }
    assert run(uniform, {"t1": 3, "t2": 3}, members) == {
        "A": {"t1": [0, 1]},
        "B": {"t1": [2], "t2": [2]},
        "C": {"t2": [0, 1]},
    }
    assert run(range_assignor, {"t1": 3, "t2": 3}, members) == {
        "A": {"t1": [0], "t2": [0]},
        "B": {"t1": [1], "t2": [1]},
        "C": {"t1": [2], "t2": [2]},
    }
