"""The active controller's cluster APIs over a fake core and a fake clock: registration,
heartbeats, fencing after the session timeout, controlled shutdown, AlterPartition,
ElectLeaders and reassignments."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import build_entity
from krust.config.broker import load_config
from krust.controller.cluster_apis import ClusterControl
from krust.controller.controller import Controller
from krust.controller.features import SUPPORTED_FEATURES
from krust.controller.records import PartitionRecord, TopicRecord

from .conftest import FakeCore, LoopRunner

TOPIC_ID = uuid.UUID(int=0xABC)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class Cluster:
    """A controller (node 1, registered at open) and its cluster APIs on a fake clock."""

    def __init__(self, tmp_path: Path, run: LoopRunner, *settings: str) -> None:
        config = load_config(
            None, {}, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:19092", *settings]
        )
        self.controller = Controller.open(config, FakeCore())
        self.clock = Clock()
        self.sleeps: list[float] = []
        self.apis = ClusterControl(self.controller, self.clock, self.sleep)
        self.run = run
        self.incarnations: dict[int, uuid.UUID] = {}

    async def sleep(self, seconds: float) -> None:
        """Sleeps no time; the second sleep ends the periodic task that asked for it."""
        self.sleeps.append(seconds)
        if len(self.sleeps) > 1:
            raise asyncio.CancelledError

    @property
    def image(self) -> Any:
        return self.controller.image

    def call(self, api: int, version: int, fields: dict[str, Any], internal: bool = True) -> Any:
        handler = {
            43: self.apis.elect_leaders,
            45: self.apis.alter_partition_reassignments,
            46: self.apis.list_partition_reassignments,
            56: self.apis.alter_partition,
            62: self.apis.register_broker,
            63: self.apis.broker_heartbeat,
        }[api]
        request = build_entity(load_request_schema(api, version), fields)
        context = RequestContext(api, version, 1, "broker", "127.0.0.1", internal=internal)
        return self.run(handler(request, context))

    def register(self, broker: int, incarnation: uuid.UUID | None = None, **fields: Any) -> Any:
        incarnation = incarnation or self.incarnations.setdefault(broker, uuid.uuid4())
        request = {
            "broker_id": broker,
            "cluster_id": self.image.cluster_id,
            "incarnation_id": incarnation,
            "listeners": [
                {"name": "PLAINTEXT", "host": "h", "port": 9000 + broker, "security_protocol": 0}
            ],
            "features": [
                {"name": name, "min_supported_version": s.min, "max_supported_version": s.max}
                for name, s in SUPPORTED_FEATURES.items()
            ],
            "rack": None,
            **fields,
        }
        return self.call(62, 4, request)

    def heartbeat(self, broker: int, offset: int | None = None, **fields: Any) -> Any:
        request = {
            "broker_id": broker,
            "broker_epoch": self.image.brokers[broker].epoch,
            "current_metadata_offset": self.image.metadata_offset if offset is None else offset,
            "want_fence": False,
            "want_shut_down": False,
            **fields,
        }
        return self.call(63, 1, request)

    def live_broker(self, broker: int) -> None:
        assert self.register(broker).error_code == ErrorCode.none
        assert not self.heartbeat(broker).is_fenced

    def topic(self, *replicas: tuple[int, ...], isr: tuple[int, ...] | None = None) -> None:
        records: list[Any] = [TopicRecord(name="t", topic_id=TOPIC_ID)]
        records += [
            PartitionRecord(
                partition_id=index,
                topic_id=TOPIC_ID,
                replicas=r,
                isr=isr or r,
                leader=(isr or r)[0],
                leader_epoch=0,
                partition_epoch=0,
            )
            for index, r in enumerate(replicas)
        ]

        async def commit() -> None:
            async with self.controller.lock:
                await self.controller.commit(records)

        self.run(commit())

    def partition(self, index: int = 0) -> Any:
        return self.image.topics["t"].partitions[index]


@pytest.fixture
def cluster(tmp_path: Path, run: LoopRunner) -> Cluster:
    return Cluster(tmp_path, run)


def test_a_broker_registers_fenced_with_the_offset_of_its_record_as_epoch(
    cluster: Cluster,
) -> None:
    next_offset = cluster.controller.next_offset()
    response = cluster.register(2)
    assert (response.error_code, response.broker_epoch) == (ErrorCode.none, next_offset)
    registered = cluster.image.brokers[2]
    assert registered.fenced and registered.epoch == next_offset
    assert cluster.image.live_brokers == (1,)


def test_a_broker_is_unfenced_once_its_metadata_reaches_its_registration(
    cluster: Cluster,
) -> None:
    epoch = cluster.register(2).broker_epoch
    behind = cluster.heartbeat(2, offset=epoch - 1)
    assert (behind.is_fenced, behind.is_caught_up) == (True, False)
    assert cluster.heartbeat(2, offset=epoch, want_fence=True).is_fenced
    caught_up = cluster.heartbeat(2, offset=epoch)
    assert (caught_up.is_fenced, caught_up.is_caught_up) == (False, True)
    assert cluster.image.live_brokers == (1, 2)


def test_a_live_node_id_cannot_register_again_with_another_incarnation(
    cluster: Cluster,
) -> None:
    cluster.live_broker(2)
    epoch = cluster.image.brokers[2].epoch
    duplicate = cluster.register(2, incarnation=uuid.uuid4())
    assert duplicate.error_code == ErrorCode.duplicate_broker_registration
    # The same incarnation again amends its registration and keeps its epoch and state.
    again = cluster.register(2)
    assert (again.error_code, again.broker_epoch) == (ErrorCode.none, epoch)
    assert not cluster.image.brokers[2].fenced


def test_a_fenced_node_id_may_register_a_new_incarnation(cluster: Cluster) -> None:
    first = cluster.register(2).broker_epoch
    second = cluster.register(2, incarnation=uuid.uuid4())
    assert second.error_code == ErrorCode.none and second.broker_epoch > first


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"cluster_id": "another"}, ErrorCode.inconsistent_cluster_id),
        (
            {
                "features": [
                    {
                        "name": "metadata.version",
                        "min_supported_version": 1,
                        "max_supported_version": 7,
                    }
                ]
            },
            ErrorCode.unsupported_version,
        ),
        ({"features": []}, ErrorCode.unsupported_version),  # metadata.version 1 only
        (
            {"listeners": [{"name": "X", "host": "h", "port": 1, "security_protocol": 9}]},
            ErrorCode.invalid_registration,
        ),
    ],
)
def test_bad_registrations_are_refused(
    cluster: Cluster, fields: dict[str, Any], error: ErrorCode
) -> None:
    before = cluster.image
    assert cluster.register(2, **fields).error_code == error
    assert cluster.image is before


def test_heartbeats_with_a_stale_epoch_are_refused(cluster: Cluster) -> None:
    cluster.live_broker(2)
    epoch = cluster.image.brokers[2].epoch
    request = {
        "broker_id": 2,
        "broker_epoch": epoch - 1,
        "current_metadata_offset": 0,
        "want_fence": False,
        "want_shut_down": False,
    }
    assert cluster.call(63, 1, request).error_code == ErrorCode.stale_broker_epoch
    unknown = {**request, "broker_id": 5}
    assert cluster.call(63, 0, unknown).error_code == ErrorCode.stale_broker_epoch


def test_a_broker_without_heartbeats_is_fenced_after_the_session_timeout(
    cluster: Cluster,
) -> None:
    cluster.live_broker(2)
    cluster.topic((2, 1), (1, 2))
    cluster.clock.now += 9_000
    assert cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now)) == []
    cluster.clock.now += 1
    assert cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now)) == [2]
    assert cluster.image.brokers[2].fenced
    assert not cluster.image.brokers[1].fenced  # this node's own broker has no heartbeats
    # The partition it led gets a leader from its ISR; it leaves the other's ISR.
    assert (cluster.partition(0).leader, cluster.partition(0).isr) == (1, (1,))
    assert cluster.partition(0).leader_epoch == 1
    assert (cluster.partition(1).leader, cluster.partition(1).isr) == (1, (1,))


def test_the_session_timeout_is_configurable(tmp_path: Path, run: LoopRunner) -> None:
    cluster = Cluster(tmp_path, run, "broker.session.timeout.ms=100")
    cluster.live_broker(2)
    cluster.clock.now += 101
    assert cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now)) == [2]


def test_heartbeats_keep_a_session_alive(cluster: Cluster) -> None:
    cluster.live_broker(2)
    for _ in range(3):
        cluster.clock.now += 8_000
        cluster.heartbeat(2)
        assert cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now)) == []


def test_controlled_shutdown_moves_leadership_before_the_broker_may_stop(
    cluster: Cluster,
) -> None:
    cluster.live_broker(2)
    cluster.live_broker(3)
    cluster.topic((2, 1, 3))
    offset_of_3 = cluster.image.metadata_offset
    first = cluster.heartbeat(2, want_shut_down=True)
    assert (first.is_fenced, first.should_shut_down) == (False, False)
    assert cluster.image.brokers[2].in_controlled_shutdown
    assert (cluster.partition().leader, cluster.partition().isr) == (1, (1, 3))
    # Broker 3 has not yet seen the leadership change: 2 must wait.
    cluster.heartbeat(3, offset=offset_of_3)
    assert not cluster.heartbeat(2, want_shut_down=True).should_shut_down
    cluster.heartbeat(3)
    assert cluster.heartbeat(2, want_shut_down=True).should_shut_down


def test_a_broker_leading_nothing_shuts_down_at_once(cluster: Cluster) -> None:
    cluster.live_broker(2)
    response = cluster.heartbeat(2, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced


def test_unfencing_gives_leaderless_partitions_their_leader_back(cluster: Cluster) -> None:
    cluster.live_broker(2)
    cluster.topic((2,))
    cluster.clock.now += 9_001
    cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now))
    assert cluster.partition().leader == -1
    assert not cluster.heartbeat(2).is_fenced
    assert (cluster.partition().leader, cluster.partition().leader_epoch) == (2, 2)


def alter_partition(cluster: Cluster, broker_epoch: int, isr: list[int]) -> Any:
    partition = cluster.partition()
    request = {
        "broker_id": 1,
        "broker_epoch": broker_epoch,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": partition.leader_epoch,
                        "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr],
                        "partition_epoch": partition.partition_epoch,
                    }
                ],
            }
        ],
    }
    return cluster.call(56, 3, request)


def test_alter_partition_checks_the_broker_epoch(cluster: Cluster) -> None:
    cluster.live_broker(2)
    cluster.topic((1, 2))
    epoch = cluster.image.brokers[1].epoch
    assert alter_partition(cluster, epoch + 1, [1]).error_code == ErrorCode.stale_broker_epoch
    response = alter_partition(cluster, epoch, [1])
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.leader_id, result.isr) == (ErrorCode.none, 1, (1,))
    assert cluster.partition().isr == (1,)


def test_cluster_apis_of_brokers_need_cluster_action(cluster: Cluster) -> None:
    class Denying:
        async def allowed(self, *args: Any) -> bool:
            return False

    cluster.controller.authorization = Denying()  # type: ignore[assignment]
    assert cluster.register(2).error_code == ErrorCode.cluster_authorization_failed
    assert 2 not in cluster.image.brokers


def test_elect_leaders_answers_per_partition(cluster: Cluster) -> None:
    cluster.live_broker(2)
    cluster.topic((2, 1))
    cluster.clock.now += 9_001
    cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now))
    cluster.heartbeat(2)  # unfenced again, not leading and out of sync: 1 took over
    assert (cluster.partition().leader, cluster.partition().isr) == (1, (1,))
    request = {"election_type": 0, "topic_partitions": None, "timeout": 1000}
    not_in_sync = cluster.call(43, 2, request, internal=False)
    (result,) = not_in_sync.replica_election_results[0].partition_result
    assert result.error_code == ErrorCode.preferred_leader_not_available
    alter_partition(cluster, cluster.image.brokers[1].epoch, [1, 2])  # 2 caught up
    response = cluster.call(43, 2, request, internal=False)
    assert response.error_code == ErrorCode.none
    (result,) = response.replica_election_results[0].partition_result
    assert result.error_code == ErrorCode.none
    assert cluster.partition().leader == 2
    bad = {"election_type": 5, "topic_partitions": [{"topic": "t", "partitions": [0]}]}
    refused = cluster.call(43, 2, bad, internal=False)
    assert refused.error_code == ErrorCode.invalid_request


def test_reassignment_to_an_unknown_broker_is_refused_and_listed_ones_show(
    cluster: Cluster,
) -> None:
    cluster.live_broker(2)
    cluster.topic((1,))
    request = {
        "timeout": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1, 7]}]}],
    }
    response = cluster.call(45, 0, request, internal=False)
    (result,) = response.responses[0].partitions
    assert result.error_code == ErrorCode.invalid_replica_assignment
    assert result.error_message == (
        "The manual partition assignment includes broker 7, but no such broker is registered."
    )
    moved = {
        "timeout": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [2]}]}],
    }
    assert cluster.call(45, 1, moved, internal=False).responses[0].partitions[0].error_code == (
        ErrorCode.none
    )
    listed = cluster.call(46, 0, {"timeout": 1000, "topics": None}, internal=False)
    (ongoing,) = listed.topics[0].partitions
    assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == (
        (2, 1),
        (2,),
        (1,),
    )


def preferred_on_broker_2(cluster: Cluster) -> None:
    """Broker 2 returns after being fenced: in sync again but not leading its partition."""
    cluster.live_broker(2)
    cluster.topic((2, 1))
    cluster.clock.now += 9_001
    cluster.run(cluster.apis.fence_stale_brokers(cluster.clock.now))
    cluster.heartbeat(2)
    alter_partition(cluster, cluster.image.brokers[1].epoch, [1, 2])
    assert cluster.partition().leader == 1


def test_leaders_are_balanced_every_check_interval(tmp_path: Path, run: LoopRunner) -> None:
    cluster = Cluster(tmp_path, run, "leader.imbalance.check.interval.seconds=42")
    preferred_on_broker_2(cluster)
    with pytest.raises(asyncio.CancelledError):
        run(cluster.apis.balance_leaders_periodically(cluster.apis.leader_balance_interval_s or 0))
    assert cluster.sleeps == [42, 42]
    assert cluster.partition().leader == 2


def test_leaders_are_balanced_back_only_when_enabled(tmp_path: Path, run: LoopRunner) -> None:
    async def started(cluster: Cluster) -> bool:
        cluster.apis.start()
        balancing = cluster.apis.leader_balancing is not None
        await cluster.apis.close()
        return balancing

    enabled = Cluster(tmp_path / "on", run)
    assert enabled.apis.leader_balance_interval_s == 300
    assert run(started(enabled))
    disabled = Cluster(tmp_path / "off", run, "auto.leader.rebalance.enable=false")
    assert disabled.apis.leader_balance_interval_s is None
    assert not run(started(disabled))
    preferred_on_broker_2(enabled)
    assert run(enabled.apis.balance_partition_leaders()) == 1
    assert enabled.partition().leader == 2
    assert run(enabled.apis.balance_partition_leaders()) == 0


def test_a_restarted_broker_whose_session_lapsed_registers_and_leaves_the_isrs(
    cluster: Cluster,
) -> None:
    cluster.live_broker(2)
    cluster.topic((2, 1))
    cluster.clock.now += 9_001  # lapsed, but not yet fenced by the periodic check
    next_offset = cluster.controller.next_offset()
    response = cluster.register(2, incarnation=uuid.uuid4())
    assert response.error_code == ErrorCode.none
    # The new registration comes after the leadership change, and its offset is the epoch.
    assert response.broker_epoch == next_offset + 1
    assert cluster.image.brokers[2].fenced
    assert (cluster.partition().leader, cluster.partition().isr) == (1, (1,))


def test_alter_partition_v2_names_the_isr_by_broker_id(cluster: Cluster) -> None:
    cluster.live_broker(2)
    cluster.topic((1, 2))
    partition = cluster.partition()
    request = {
        "broker_id": 1,
        "broker_epoch": cluster.image.brokers[1].epoch,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": partition.leader_epoch,
                        "new_isr": [1],
                        "partition_epoch": partition.partition_epoch,
                    }
                ],
            }
        ],
    }
    (result,) = cluster.call(56, 2, request).topics[0].partitions
    assert (result.error_code, result.isr, result.partition_epoch) == (ErrorCode.none, (1,), 1)
