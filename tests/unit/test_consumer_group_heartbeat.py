"""ConsumerGroupHeartbeat (KIP-848) on the coordinator: joins, reconciliation, leaves, timeouts,
static members, regexes, restarts and the errors Kafka answers, on a fake clock."""

from __future__ import annotations

import asyncio

import pytest
from krust.config.broker import load_config
from krust.config.errors import ConfigError
from krust.group.results import ErrorCode

from .doubles.clock import FakeClock
from .doubles.consumer_group import new_group
from .doubles.group import FakeCore, async_test, fast_config, start_coordinator

NONE = ErrorCode.none
SESSION_MS = 45_000


@async_test
async def test_a_joining_member_gets_its_epoch_and_assignment() -> None:
    group = await new_group(group_consumer_heartbeat_interval_ms=7_000)
    joined = await group.heartbeat("m1", 0, topics=["t"])
    assert (joined.error, joined.member_id, joined.member_epoch) == (NONE, "m1", 1)
    assert joined.heartbeat_interval_ms == 7_000
    assert group.partitions(joined) == {"t": {0, 1, 2, 3}}
    # A heartbeat that changes nothing carries no assignment.
    again = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert (again.error, again.member_epoch, again.assignment) == (NONE, 1, None)


@async_test
async def test_partitions_are_revoked_before_they_move_to_a_new_member() -> None:
    """The seed's worked sequence: m2 joins; m1 keeps half and must revoke the rest; m2 gets
    nothing until m1 reports the revoked partitions gone."""
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    joined = await group.heartbeat("m2", 0, topics=["t"])
    assert (joined.member_epoch, group.partitions(joined)) == (2, {})

    revoking = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    kept = group.partitions(revoking)
    assert revoking.member_epoch == 1 and kept is not None and len(kept["t"]) == 2
    # m2's target partitions are still owned by m1: it waits at the new epoch.
    waiting = await group.heartbeat("m2", 2, owned={})
    assert waiting.member_epoch == 2 and not group.partitions(waiting)

    # m1 still owns them: nothing moves.
    still = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert still.member_epoch == 1
    done = await group.heartbeat("m1", 1, owned=kept)
    assert done.member_epoch == 2
    given = await group.heartbeat("m2", 2, owned={})
    assert given.member_epoch == 2
    assert group.partitions(given) == {"t": {0, 1, 2, 3} - kept["t"]}
    described = group.coordinator.consumer.groups["group"]
    assert described.state.value == "Stable"


@async_test
async def test_a_leaving_member_hands_its_partitions_to_the_others() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    await group.heartbeat("m2", 0, topics=["t"])
    first = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    kept = group.partitions(first)
    assert kept is not None
    await group.heartbeat("m1", 1, owned=kept)
    left = await group.heartbeat("m2", -1)
    assert (left.error, left.member_epoch) == (NONE, -1)
    after = await group.heartbeat("m1", 2, owned=kept)
    assert after.member_epoch == 3 and group.partitions(after) == {"t": {0, 1, 2, 3}}


@async_test
async def test_a_member_without_heartbeats_is_fenced_after_the_session_timeout() -> None:
    clock = FakeClock()
    group = await new_group(clock, group_consumer_session_timeout_ms=SESSION_MS)
    epoch = (await group.heartbeat("m1", 0, topics=["t"])).member_epoch
    await group.heartbeat("m2", 0, topics=["t"])
    owned: dict[str, set[int]] = {}
    for _ in range(3):
        clock.advance(SESSION_MS // 3)
        beat = await group.heartbeat("m1", epoch, owned=owned)
        epoch, owned = beat.member_epoch, group.partitions(beat) or owned
    await asyncio.sleep(0)
    # m2 never heartbeat again: fenced, its partitions went back to m1.
    assert set(group.coordinator.consumer.groups["group"].members) == {"m1"}
    assert (epoch, owned) == (3, {"t": {0, 1, 2, 3}})
    fenced = await group.heartbeat("m2", 2, owned={})
    assert fenced.error is ErrorCode.unknown_member_id


@async_test
async def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced() -> None:
    clock = FakeClock()
    group = await new_group(clock)
    await group.heartbeat("m1", 0, topics=["t"], rebalance_timeout_ms=10_000)
    await group.heartbeat("m2", 0, topics=["t"])
    await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})  # asked to revoke two
    clock.advance(5_000)
    await group.heartbeat("m2", 2, owned={})
    clock.advance(5_000)
    await asyncio.sleep(0)
    assert set(group.coordinator.consumer.groups["group"].members) == {"m2"}
    assert (await group.heartbeat("m1", 1, owned={})).error is ErrorCode.unknown_member_id


@async_test
async def test_epoch_errors_are_kafkas_and_leave_the_group_unchanged() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    ahead = await group.heartbeat("m1", 5, owned={})
    assert ahead.error is ErrorCode.fenced_member_epoch
    assert ahead.message is not None and "greater member epoch (5)" in ahead.message
    unknown = await group.heartbeat("nobody", 1, owned={})
    assert unknown.error is ErrorCode.unknown_member_id
    missing = await group.heartbeat("m1", 1, owned={}, group_id="other")
    assert missing.error is ErrorCode.group_id_not_found
    assert "other" not in group.coordinator.consumer.groups
    assert group.coordinator.consumer.groups["group"].group_epoch == 1
    ok = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert (ok.error, ok.member_epoch) == (NONE, 1)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"assignor": "sticky"}, ErrorCode.unsupported_assignor, "ServerAssignor sticky is not"),
        ({"regex": "t(?=x)"}, ErrorCode.invalid_regular_expression, "not a valid regular"),
        ({"topics": None}, ErrorCode.invalid_request, "Either SubscribedTopicNames or"),
    ],
)
@async_test
async def test_bad_joins_get_kafkas_errors(
    kwargs: dict[str, object], error: ErrorCode, message: str
) -> None:
    group = await new_group()
    args: dict[str, object] = {"topics": ["t"]}
    args.update(kwargs)
    refused = await group.heartbeat("m1", 0, **args)  # type: ignore[arg-type]
    assert refused.error is error
    assert refused.message is not None and message in refused.message
    assert "group" not in group.coordinator.consumer.groups


@async_test
async def test_a_member_subscribed_to_nothing_joins_with_nothing() -> None:
    group = await new_group()
    joined = await group.heartbeat("m1", 0, topics=[])
    assert (joined.error, joined.member_epoch, group.partitions(joined)) == (NONE, 1, {})


@async_test
async def test_group_consumer_max_size_refuses_extra_members() -> None:
    group = await new_group(group_consumer_max_size=1)
    await group.heartbeat("m1", 0, topics=["t"])
    refused = await group.heartbeat("m2", 0, topics=["t"])
    assert refused.error is ErrorCode.group_max_size_reached
    assert set(group.coordinator.consumer.groups["group"].members) == {"m1"}


@async_test
async def test_the_first_configured_assignor_is_the_default() -> None:
    group = await new_group(group_consumer_assignors=("range", "uniform"))
    await group.heartbeat("m1", 0, topics=["t"])
    error, _, described = group.coordinator.consumer_group("group")
    assert error is NONE and described is not None
    from krust.group.consumer.target_assignment import preferred_assignor

    assert preferred_assignor(described, group.coordinator.consumer.assignors) == "range"
    # A member that names an assignor is followed (the most named one wins).
    await group.heartbeat("m2", 0, topics=["t"], assignor="uniform")
    assert preferred_assignor(described, group.coordinator.consumer.assignors) == "uniform"


@async_test
async def test_a_regex_subscription_picks_up_a_topic_created_later() -> None:
    group = await new_group()
    joined = await group.heartbeat("m1", 0, regex="orders-.*")
    assert (joined.member_epoch, group.partitions(joined)) == (1, {})
    group.controller.add_topic("orders-eu", 2)
    group.controller.add_topic("other", 2)
    group.coordinator.consumer.on_metadata_change()
    later = await group.heartbeat("m1", 1, owned={})
    assert later.member_epoch == 2 and group.partitions(later) == {"orders-eu": {0, 1}}


@async_test
async def test_added_partitions_bump_the_epoch_and_are_assigned() -> None:
    group = await new_group()
    await group.heartbeat("m1", 0, topics=["t"])
    group.controller.add_topic("t", 6)  # same name: the fake replaces it with 6 partitions
    grown = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert grown.member_epoch == 2 and group.partitions(grown) == {"t": set(range(6))}


@async_test
async def test_a_static_member_comes_back_to_its_partitions() -> None:
    group = await new_group()
    await group.heartbeat("a1", 0, topics=["t"], instance_id="a")
    await group.heartbeat("b1", 0, topics=["t"], instance_id="b")
    first = await group.heartbeat("a1", 1, owned={"t": [0, 1, 2, 3]}, instance_id="a")
    kept = group.partitions(first)
    assert kept is not None
    await group.heartbeat("a1", 1, owned=kept, instance_id="a")
    b = await group.heartbeat("b1", 2, owned={}, instance_id="b")
    b_parts = group.partitions(b)
    left = await group.heartbeat("b1", -2, instance_id="b")
    assert left.member_epoch == -2
    # Its instance id is still taken by the departed member until it rejoins.
    back = await group.heartbeat("b2", 0, topics=["t"], instance_id="b")
    assert back.error is NONE and group.partitions(back) == b_parts
    stale = await group.heartbeat("b1", 2, owned={}, instance_id="b")
    assert stale.error is ErrorCode.fenced_instance_id
    taken = await group.heartbeat("b3", 0, topics=["t"], instance_id="b")
    assert taken.error is ErrorCode.unreleased_instance_id


@async_test
async def test_a_restarted_coordinator_resumes_the_group_at_its_epoch() -> None:
    core = FakeCore()
    group = await new_group(core=core)
    await group.heartbeat("m1", 0, topics=["t"])
    await group.heartbeat("m2", 0, topics=["t"], regex="x.*")
    await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    before = group.coordinator.consumer.groups["group"]
    await group.coordinator.close()

    restarted = await start_coordinator(fast_config(), core, group.controller, FakeClock())
    after = restarted.consumer.groups["group"]
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch,
        before.assignment_epoch,
    )
    assert after.members == before.members
    assert after.target_assignment == before.target_assignment
    assert after.partition_epochs == before.partition_epochs
    assert set(after.resolved_regexes) == {"x.*"}
    assert after.state.value == "Reconciling"


@async_test
async def test_consumer_protocol_needs_group_version_1() -> None:
    group = await new_group()
    group.controller.image.features["group.version"] = 0
    refused = await group.heartbeat("m1", 0, topics=["t"])
    assert refused.error is ErrorCode.unsupported_version


def test_consumer_group_timeouts_outside_their_bounds_are_refused(tmp_path: object) -> None:
    base = [f"log.dirs={tmp_path}"]
    for override, key in [
        ("group.consumer.session.timeout.ms=30000", "group.consumer.session.timeout.ms"),
        ("group.consumer.heartbeat.interval.ms=20000", "group.consumer.heartbeat.interval.ms"),
        ("group.consumer.min.session.timeout.ms=70000", "group.consumer.max.session.timeout.ms"),
        (
            "group.consumer.min.heartbeat.interval.ms=20000",
            "group.consumer.max.heartbeat.interval.ms",
        ),
    ]:
        with pytest.raises(ConfigError, match=key):
            load_config(overrides=[*base, override])
    config = load_config(
        overrides=[
            *base,
            "group.consumer.min.session.timeout.ms=10000",
            "group.consumer.session.timeout.ms=10000",
        ]
    )
    assert config["group.consumer.session.timeout.ms"] == 10000


@async_test
async def test_a_group_config_overrides_the_session_timeout_and_heartbeat_interval() -> None:
    clock = FakeClock()
    group = await new_group(clock)
    group.controller.image.group_configs["group"] = {
        "consumer.session.timeout.ms": "50000",
        "consumer.heartbeat.interval.ms": "6000",
    }
    joined = await group.heartbeat("m1", 0, topics=["t"])
    assert joined.heartbeat_interval_ms == 6000
    other = await group.heartbeat("o1", 0, topics=["t"], group_id="other")
    assert other.heartbeat_interval_ms == 5000  # the broker's group.consumer.heartbeat.interval.ms
    clock.advance(46_000)  # past the broker's 45 s, within the group's 50 s
    await asyncio.sleep(0)
    assert "m1" in group.coordinator.consumer.groups["group"].members
    assert "o1" not in group.coordinator.consumer.groups["other"].members
    clock.advance(4_000)
    await asyncio.sleep(0)
    assert "m1" not in group.coordinator.consumer.groups["group"].members


@async_test
async def test_a_deleted_topic_bumps_the_epoch_and_leaves_the_assignment() -> None:
    group = await new_group()
    group.controller.add_topic("u", 2)
    joined = await group.heartbeat("m1", 0, topics=["t", "u"])
    assert group.partitions(joined) == {"t": {0, 1, 2, 3}, "u": {0, 1}}
    u = group.topic_id("u")
    del group.controller.image.topics["u"]
    group.coordinator.consumer.on_metadata_change()
    # The consumer dropped the deleted topic's partitions itself.
    after = await group.heartbeat("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert after.member_epoch == 2
    assert after.assignment is not None and u not in after.assignment
