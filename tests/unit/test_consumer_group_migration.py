"""Both protocols in one group (KIP-848): classic members in a consumer group, and the online
upgrade and downgrade between the group types under group.consumer.migration.policy, on a fake
clock, with Kafka's answers."""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import Mapping, Sequence

import pytest
from krust.bridge.dispatcher import RequestContext
from krust.config.broker import load_config
from krust.config.errors import ConfigError
from krust.coordinator.wire import Writer
from krust.group.api_consumer_group import ConsumerGroupApis
from krust.group.classic.group import GroupState
from krust.group.classic.group_manager import LeavingMember
from krust.group.consumer.consumer_protocol import parse_assignment, serialize_assignment
from krust.group.consumer.heartbeat_request import HeartbeatRequest, HeartbeatResult
from krust.group.coordinator import GroupCoordinator
from krust.group.offset_manager import (
    OffsetCommitRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from krust.group.results import ErrorCode, JoinGroupResult
from krust.group.settings import ConsumerGroupMigrationPolicy, GroupCoordinatorConfig

from .doubles.clock import FakeClock
from .doubles.group import (
    FakeController,
    FakeCore,
    async_test,
    begin,
    fast_config,
    join_request,
    start_coordinator,
    sync_request,
)

NONE = ErrorCode.none
REBALANCE = ErrorCode.rebalance_in_progress
CLASSIC_SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(topics: Sequence[str], owned: Mapping[str, Sequence[int]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription: v0 without owned partitions, v1 (cooperative) with."""
    writer = Writer()
    writer.int16(0 if owned is None else 1)
    writer.int32(len(topics))
    for topic in topics:
        writer.string(topic)
    writer.int32(-1)
    if owned is not None:
        writer.int32(len(owned))
        for topic, partitions in owned.items():
            writer.string(topic)
            writer.int32(len(partitions))
            for partition in partitions:
                writer.int32(partition)
    return writer.getvalue()


class Mixed:
    """A coordinator with topic "t" (4 partitions), members of either protocol."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        controller: FakeController,
        core: FakeCore,
        clock: FakeClock,
    ) -> None:
        self.coordinator = coordinator
        self.controller = controller
        self.core = core
        self.clock = clock

    async def consumer(
        self,
        member_id: str,
        epoch: int,
        owned: Mapping[str, Sequence[int]] | None = None,
        instance_id: str | None = None,
    ) -> HeartbeatResult:
        ids = {name: t.topic_id for name, t in self.controller.image.topics.items()}
        return await self.coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id="group",
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rebalance_timeout_ms=REBALANCE_MS if epoch == 0 else -1,
                subscribed_topic_names=("t",) if epoch == 0 else None,
                owned=[]
                if epoch == 0
                else None
                if owned is None
                else [(ids[t], list(p)) for t, p in owned.items()],
            )
        )

    def partitions(self, result: HeartbeatResult) -> set[int] | None:
        if result.assignment is None:
            return None
        return {p for parts in result.assignment.values() for p in parts}

    async def join(
        self,
        member_id: str = "",
        *,
        owned: Mapping[str, Sequence[int]] | None = None,
        protocol_type: str = "consumer",
        protocol_names: Sequence[str] = ("range",),
        require_known_member_id: bool = False,
        instance_id: str | None = None,
    ) -> JoinGroupResult:
        metadata = subscription(["t"], owned)
        return await self.coordinator.join_group(
            join_request(
                "group",
                member_id,
                protocols=[(name, metadata) for name in protocol_names],
                protocol_type=protocol_type,
                session_timeout_ms=CLASSIC_SESSION_MS,
                rebalance_timeout_ms=REBALANCE_MS,
                require_known_member_id=require_known_member_id,
                group_instance_id=instance_id,
            )
        )

    async def sync(
        self, member_id: str, generation: int, protocol_name: str | None = "range"
    ) -> tuple[ErrorCode, set[int]]:
        result = await self.coordinator.sync_group(
            sync_request(
                "group",
                member_id,
                generation,
                protocol_type="consumer",
                protocol_name=protocol_name,
            )
        )
        partitions = {p for _, parts in parse_assignment(result.assignment) for p in parts}
        return result.error, partitions

    def heartbeat(self, member_id: str, generation: int) -> ErrorCode:
        return self.coordinator.heartbeat("group", member_id, None, generation)

    async def commit(self, member_id: str, generation: int, version: int = 8) -> ErrorCode:
        [(_, [(_, error)])] = await self.coordinator.commit_offsets(
            OffsetCommitRequest(
                "group",
                member_id,
                None,
                generation,
                -1,
                version,
                (("t", (PartitionCommit(0, 5, -1, None),)),),
            )
        )
        return error

    async def commit_in_transaction(self, member_id: str, generation: int) -> ErrorCode:
        [(_, [(_, error)])] = await self.coordinator.commit_transactional_offsets(
            TxnOffsetCommitRequest(
                "group",
                7,
                0,
                generation,
                member_id,
                None,
                (("t", (PartitionCommit(0, 5, -1, None),)),),
            )
        )
        return error

    async def member_types(self) -> dict[str, int]:
        request = types.SimpleNamespace(group_ids=["group"], include_authorized_operations=False)
        response = await ConsumerGroupApis(self.coordinator).describe(
            request, RequestContext(69, 1, 1, "admin", "127.0.0.1")
        )
        [group] = response.groups
        return {m.member_id: m.member_type for m in group.members}


async def mixed(
    config: GroupCoordinatorConfig | None = None, restarted: Mixed | None = None
) -> Mixed:
    """A new coordinator; or, given `restarted`, one that loads that one's log and topics."""
    if restarted is not None:
        await restarted.coordinator.close()
        controller, core = restarted.controller, restarted.core
    else:
        controller, core = FakeController(), FakeCore()
        controller.add_topic("t", 4)
    clock = FakeClock()
    coordinator = await start_coordinator(config or fast_config(), core, controller, clock)
    return Mixed(coordinator, controller, core, clock)


async def classic_joins_consumer_group(
    group: Mixed, instance_id: str | None = None
) -> tuple[str, set[int], set[int]]:
    """m1 (consumer protocol) owns all of t; a classic member joins; m1 revokes; the classic
    member rejoins for its half. Returns its member id, its partitions and m1's."""
    await group.consumer("m1", 0, instance_id=instance_id)
    joined = await group.join()
    assert (joined.error, joined.generation_id) == (NONE, 2)
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    classic = joined.member_id
    # Its partitions are still m1's: it syncs to nothing and waits.
    assert await group.sync(classic, 2) == (NONE, set())
    assert group.heartbeat(classic, 2) is NONE
    revoking = await group.consumer("m1", 1, {"t": [0, 1, 2, 3]}, instance_id)
    kept = group.partitions(revoking)
    assert kept is not None and len(kept) == 2
    assert (await group.consumer("m1", 1, {"t": sorted(kept)}, instance_id)).member_epoch == 2
    # Now they are free: the classic member is asked to rejoin, and gets them.
    assert group.heartbeat(classic, 2) is REBALANCE
    rejoined = await group.join(classic)
    assert (rejoined.error, rejoined.member_id, rejoined.generation_id) == (NONE, classic, 2)
    error, partitions = await group.sync(classic, 2)
    assert (error, partitions) == (NONE, {0, 1, 2, 3} - kept)
    assert group.heartbeat(classic, 2) is NONE
    return classic, partitions, kept


@async_test
async def test_a_classic_member_joins_a_consumer_group_and_gets_its_share() -> None:
    group = await mixed()
    classic, _, _ = await classic_joins_consumer_group(group)
    assert group.coordinator.consumer.groups["group"].state.value == "Stable"
    assert await group.member_types() == {"m1": 1, classic: 0}
    # It commits with its generation, which is its member epoch, on any OffsetCommit version.
    assert await group.commit(classic, 2) is NONE
    assert await group.commit(classic, 1) is ErrorCode.illegal_generation
    assert await group.commit("m1", 2) is ErrorCode.unsupported_version
    assert await group.commit_in_transaction(classic, 2) is NONE
    assert await group.commit_in_transaction(classic, 3) is ErrorCode.illegal_generation
    assert await group.commit_in_transaction("m1", 1) is ErrorCode.stale_member_epoch


@pytest.mark.parametrize("cooperative", [True, False])
@async_test
async def test_a_classic_member_rejoins_to_revoke_before_its_partitions_move(
    cooperative: bool,
) -> None:
    group = await mixed()
    classic, mine, _ = await classic_joins_consumer_group(group)
    # Two more members: each of the four gets one partition, so the classic member loses one.
    await group.consumer("m2", 0)
    await group.consumer("m3", 0)
    assert group.heartbeat(classic, 2) is REBALANCE
    if cooperative:
        # It still owns its partitions: it keeps part of them at its generation, must revoke
        # the rest and rejoin.
        still = await group.join(classic, owned={"t": sorted(mine)})
        assert still.generation_id == 2
        error, kept = await group.sync(classic, 2)
        assert error is NONE and len(kept) < len(mine) and kept <= mine
        assert group.heartbeat(classic, 2) is REBALANCE
        done = await group.join(classic, owned={"t": sorted(kept)})
    else:
        # An eager consumer revoked everything before rejoining.
        done = await group.join(classic, owned={})
    assert (done.error, done.generation_id) == (NONE, 4)
    assert group.coordinator.consumer.groups["group"].members[classic].member_epoch == 4


@async_test
async def test_classic_requests_to_a_consumer_group_get_kafkas_errors() -> None:
    group = await mixed()
    classic, _, _ = await classic_joins_consumer_group(group)
    assert (await group.sync(classic, 1))[0] is ErrorCode.illegal_generation
    assert (await group.sync(classic, 2, "roundrobin"))[0] is ErrorCode.inconsistent_group_protocol
    assert group.heartbeat(classic, 3) is ErrorCode.illegal_generation
    assert group.heartbeat("nobody", 2) is ErrorCode.unknown_member_id
    # A member on the consumer protocol does not send classic requests.
    assert group.heartbeat("m1", 2) is ErrorCode.unknown_member_id
    assert (await group.sync("m1", 2))[0] is ErrorCode.unknown_member_id
    refused = await group.join(protocol_type="connect")
    assert refused.error is ErrorCode.inconsistent_group_protocol
    refused = await group.join(protocol_names=["roundrobin"])
    assert refused.error is ErrorCode.inconsistent_group_protocol
    asked = await group.join(require_known_member_id=True)
    assert asked.error is ErrorCode.member_id_required and asked.member_id
    assert asked.member_id not in group.coordinator.consumer.groups["group"].members
    # KIP-394: it comes back with that id and joins.
    joined = await group.join(asked.member_id, require_known_member_id=True)
    assert (joined.error, joined.member_id) == (NONE, asked.member_id)
    error, [left] = await group.coordinator.leave("group", [LeavingMember("m1", None)])
    assert (error, left.error) == (NONE, ErrorCode.unknown_member_id)
    assert set(group.coordinator.consumer.groups["group"].members) == {
        "m1",
        classic,
        asked.member_id,
    }


@async_test
async def test_a_classic_member_that_leaves_hands_its_partitions_over() -> None:
    group = await mixed()
    classic, _, _ = await classic_joins_consumer_group(group)
    error, [left] = await group.coordinator.leave("group", [LeavingMember(classic, None)])
    assert (error, left.error) == (NONE, NONE)
    consumer_group = group.coordinator.consumer.groups["group"]
    assert set(consumer_group.members) == {"m1"} and consumer_group.group_epoch == 3
    taken = await group.consumer("m1", 2, owned={"t": [0, 1]})
    assert taken.member_epoch == 3


@pytest.mark.parametrize("rejoins", [True, False])
@async_test
async def test_a_silent_classic_member_is_fenced(rejoins: bool) -> None:
    """Without heartbeats it goes after its own session timeout; asked to rejoin, it goes
    after its rebalance timeout if it does not."""
    group = await mixed()
    classic, _, _ = await classic_joins_consumer_group(group)
    members = group.coordinator.consumer.groups["group"].members
    if rejoins:
        await group.consumer("m2", 0)
        assert group.heartbeat(classic, 2) is REBALANCE
        for _ in range(REBALANCE_MS // 5_000):
            group.clock.advance(5_000)
            assert group.heartbeat(classic, 2) in (REBALANCE, ErrorCode.unknown_member_id)
            await group.consumer("m1", 2)
            await group.consumer("m2", 3)
    else:
        group.clock.advance(CLASSIC_SESSION_MS - 1)
        assert classic in members
        group.clock.advance(1)
    await group.coordinator.idle()
    assert classic not in group.coordinator.consumer.groups["group"].members


@async_test
async def test_a_classic_member_is_still_there_after_a_restart() -> None:
    group = await mixed()
    classic, mine, _ = await classic_joins_consumer_group(group)
    restarted = await mixed(restarted=group)
    assert restarted.heartbeat(classic, 2) is NONE
    assert await restarted.sync(classic, 2) == (NONE, mine)
    assert await restarted.member_types() == {"m1": 1, classic: 0}


async def classic_group(group: Mixed) -> dict[str, set[int]]:
    """Two classic members, the leader assigning t's partitions half and half."""
    joins = [await begin(group.join()) for _ in range(2)]
    group.clock.advance(0)
    joined = [await join for join in joins]
    halves = [(0, 1), (2, 3)]
    assignments = {
        r.member_id: serialize_assignment((("t", half),), 0)
        for r, half in zip(joined, halves, strict=True)
    }
    for r in joined:
        sent = assignments if r.member_id == r.leader_id else None
        synced = await group.coordinator.sync_group(
            sync_request("group", r.member_id, r.generation_id, sent)
        )
        assert synced.error is NONE
    return {r.member_id: set(half) for r, half in zip(joined, halves, strict=True)}


@async_test
async def test_an_upgraded_group_keeps_the_classic_members_partitions() -> None:
    group = await mixed()
    owned = await classic_group(group)
    joined = await group.consumer("m1", 0)
    assert joined.error is NONE and "group" not in group.coordinator.groups.groups
    consumer_group = group.coordinator.consumer.groups["group"]
    # The classic generation (1) became the group epoch; the new member bumped it.
    assert consumer_group.group_epoch == 2
    for member_id, partitions in owned.items():
        member = consumer_group.members[member_id]
        assert member.uses_classic_protocol and member.member_epoch == 1
        assert {p for parts in member.assigned_partitions.values() for p in parts} == partitions
        assert group.heartbeat(member_id, 1) is REBALANCE
    # A restart finds the consumer group.
    restarted = await mixed(restarted=group)
    assert "group" not in restarted.coordinator.groups.groups
    assert set(restarted.coordinator.consumer.groups["group"].members) == {"m1", *owned}


@async_test
async def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    group = await mixed()
    owned = await classic_group(group)
    await group.consumer("m1", 0)
    consumer_group = group.coordinator.consumer.groups["group"]
    targets = {m: set().union(*consumer_group.target_of(m).values()) for m in owned}
    left = await group.consumer("m1", -1)
    assert left.error is NONE
    assert "group" not in group.coordinator.consumer.groups
    classic = group.coordinator.groups.groups["group"]
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and set(classic.members) == set(owned)
    # Each classic member's assignment is its target in the consumer group.
    for member_id in owned:
        assigned = parse_assignment(classic.members[member_id].assignment)
        assert {p for _, parts in assigned for p in parts} == targets[member_id]
    # The classic members rejoin the classic group and get a new generation.
    joins = [await begin(group.join(member_id)) for member_id in owned]
    results = [await join for join in joins]
    assert all(r.error is NONE and r.generation_id == 3 for r in results)
    await group.coordinator.idle()
    restarted = await mixed(restarted=group)
    assert "group" not in restarted.coordinator.consumer.groups
    assert set(restarted.coordinator.groups.groups["group"].members) == set(owned)


@pytest.mark.parametrize("downgrade", [True, False])
@async_test
async def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
    downgrade: bool,
) -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: no rebalance, the new instance
    takes over the old one's partitions."""
    policy = ConsumerGroupMigrationPolicy.BIDIRECTIONAL if downgrade else "upgrade"
    config = dataclasses.replace(
        fast_config(), group_consumer_migration_policy=ConsumerGroupMigrationPolicy(policy)
    )
    group = await mixed(config)
    classic, mine, kept = await classic_joins_consumer_group(group, instance_id="i1")
    replacing = await group.join(instance_id="i1")
    assert replacing.error is NONE
    if not downgrade:
        members = group.coordinator.consumer.groups["group"].members
        assert set(members) == {replacing.member_id, classic}
        return
    assert "group" not in group.coordinator.consumer.groups
    downgraded = group.coordinator.groups.groups["group"]
    assert downgraded.is_in(GroupState.STABLE)
    assert set(downgraded.members) == {replacing.member_id, classic}
    error, partitions = await group.sync(replacing.member_id, downgraded.generation_id)
    assert (error, partitions) == (NONE, kept)
    assert (await group.sync(classic, downgraded.generation_id)) == (NONE, mine)


@pytest.mark.parametrize("policy", list(ConsumerGroupMigrationPolicy))
@async_test
async def test_the_migration_policy_decides_upgrade_and_downgrade(
    policy: ConsumerGroupMigrationPolicy,
) -> None:
    config = dataclasses.replace(fast_config(), group_consumer_migration_policy=policy)
    upgrading = await mixed(config)
    await classic_group(upgrading)
    joined = await upgrading.consumer("m1", 0)
    if policy.upgrade_enabled:
        assert joined.error is NONE
    else:
        assert (joined.error, joined.message) == (
            ErrorCode.group_id_not_found,
            "Group group is not a consumer group.",
        )
        assert "group" in upgrading.coordinator.groups.groups

    downgrading = await mixed(config)
    classic, _, _ = await classic_joins_consumer_group(downgrading)
    assert (await downgrading.consumer("m1", -1)).error is NONE
    if policy.downgrade_enabled:
        assert set(downgrading.coordinator.groups.groups["group"].members) == {classic}
    else:
        assert set(downgrading.coordinator.consumer.groups["group"].members) == {classic}


@async_test
async def test_a_group_not_on_the_consumer_protocol_type_is_not_upgraded() -> None:
    group = await mixed()
    joins = [await begin(group.join(protocol_type="connect"))]
    group.clock.advance(0)
    assert (await joins[0]).error is NONE
    refused = await group.consumer("m1", 0)
    assert refused.error is ErrorCode.group_id_not_found


@async_test
async def test_a_classic_join_replaces_an_empty_consumer_group() -> None:
    group = await mixed()
    await group.consumer("m1", 0)
    await group.consumer("m1", -1)
    join = await begin(group.join())
    while not join.done():  # the consumer group's tombstones are written first
        group.clock.advance(0)
        await asyncio.sleep(0)
    joined = await join
    assert (joined.error, joined.generation_id) == (NONE, 1)
    assert "group" not in group.coordinator.consumer.groups
    assert "group" in group.coordinator.groups.groups


def test_the_migration_policy_is_read_from_the_broker_config(tmp_path: object) -> None:
    assert GroupCoordinatorConfig().group_consumer_migration_policy.value == "bidirectional"
    base = [f"log.dirs={tmp_path}"]
    config = load_config(overrides=[*base, "group.consumer.migration.policy=downgrade"])
    read = GroupCoordinatorConfig.from_config(config)
    assert read.group_consumer_migration_policy is ConsumerGroupMigrationPolicy.DOWNGRADE
    with pytest.raises(ConfigError, match=r"group\.consumer\.migration\.policy"):
        load_config(overrides=[*base, "group.consumer.migration.policy=sideways"])
