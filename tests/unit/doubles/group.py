"""In-memory stand-ins for the core and the controller, for the coordinator's unit tests.

FakeCore keeps logs as lists of records with real offsets (and can compact them, leaving offset
gaps like Kafka's cleaner); FakeController holds a metadata image of the documented shape.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from krust.coordinator.wire import Writer
from krust.group.classic.group_manager import JoinGroupRequest, SyncGroupRequest
from krust.group.coordinator import GroupCoordinator
from krust.group.records import OFFSETS_TOPIC
from krust.group.results import ErrorCode, JoinGroupResult
from krust.group.settings import GroupCoordinatorConfig

from .clock import FakeClock

if TYPE_CHECKING:
    from krust._core import StoredRecord

T = TypeVar("T")
P = ParamSpec("P")


class FakeCore:
    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[StoredRecord]] = {}
        self.fail_appends = False
        self.append_calls = 0

    def internal_append(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        producer: tuple[int, int] | None = None,
    ) -> int:
        if self.fail_appends:
            raise OSError("injected disk failure")
        self.append_calls += 1
        log = self.logs.setdefault((topic, partition), [])
        base = log[-1]["offset"] + 1 if log else 0
        producer_id = -1 if producer is None else producer[0]
        for index, (key, value) in enumerate(records):
            log.append(
                {
                    "offset": base + index,
                    "timestamp": 0,
                    "key": key,
                    "value": value,
                    "producer_id": producer_id,
                    "control": None,
                }
            )
        return base

    def write_txn_markers(
        self, markers: Sequence[tuple[str, int, int, int, int, bool]]
    ) -> list[int]:
        for topic, partition, producer_id, _, _, commit in markers:
            self.write_marker(topic, partition, producer_id, commit)
        return [0] * len(markers)

    def write_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker, as a partition leader appends it for WriteTxnMarkers."""
        log = self.logs.setdefault((topic, partition), [])
        log.append(
            {
                "offset": log[-1]["offset"] + 1 if log else 0,
                "timestamp": 0,
                "key": None,
                "value": None,
                "producer_id": producer_id,
                "control": 1 if commit else 0,
            }
        )

    def internal_read(
        self, topic: str, partition: int, start_offset: int, max_bytes: int
    ) -> list[StoredRecord]:
        chunk: list[StoredRecord] = []
        size = 0
        for record in self.logs.get((topic, partition), []):
            if record["offset"] < start_offset:
                continue
            size += len(record["key"] or b"") + len(record["value"] or b"")
            if chunk and size > max_bytes:
                break
            chunk.append(record)
        return chunk

    def log_end_offset(self, topic: str, partition: int) -> int:
        log = self.logs.get((topic, partition), [])
        return log[-1]["offset"] + 1 if log else 0

    def records(self, topic: str = OFFSETS_TOPIC) -> list[StoredRecord]:
        return [r for (name, _), log in sorted(self.logs.items()) if name == topic for r in log]

    def compact(self, topic: str = OFFSETS_TOPIC) -> None:
        """Keep the last record of each key (tombstones included), offsets unchanged."""
        for (name, partition), log in self.logs.items():
            if name != topic:
                continue
            last = {record["key"]: record["offset"] for record in log}
            self.logs[(name, partition)] = [r for r in log if last[r["key"]] == r["offset"]]


@dataclass(frozen=True)
class FakeBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Addresses on other listeners than the first, by listener name.
    listeners: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def address_for(self, listener: str) -> tuple[str, int]:
        return self.listeners.get(listener, (self.host, self.port))


@dataclass(frozen=True)
class FakePartition:
    partition: int
    leader: int


@dataclass(frozen=True)
class FakeTopic:
    name: str
    partitions: Mapping[int, FakePartition]
    configs: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class FakeImage:
    node_id: int
    brokers: dict[int, FakeBroker]
    topics: dict[str, FakeTopic]
    features: dict[str, int] = field(default_factory=lambda: {"group.version": 1})
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def topics_by_id(self) -> Mapping[uuid.UUID, FakeTopic]:
        return {topic.topic_id: topic for topic in self.topics.values()}


class FakeController:
    def __init__(self, node_id: int = 1, broker_ids: Sequence[int] = (1,)) -> None:
        brokers = {b: FakeBroker(b, f"broker-{b}.test", 9090 + b) for b in broker_ids}
        self.image = FakeImage(node_id, brokers, {})
        self.created: list[tuple[str, int, int, dict[str, str], bool]] = []
        self.fail_creation = False
        self._listeners: list[Callable[[], None]] = []

    def on_metadata_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def add_topic(
        self, name: str, partitions: int, leader: int | None = None, internal: bool = False
    ) -> FakeTopic:
        owner = self.image.node_id if leader is None else leader
        topic = FakeTopic(
            name, {p: FakePartition(p, owner) for p in range(partitions)}, internal=internal
        )
        self.image.topics[name] = topic
        for listener in self._listeners:
            listener()
        return topic

    def move_leader(self, name: str, partition: int, leader: int) -> None:
        topic = self.image.topics[name]
        partitions = dict(topic.partitions)
        partitions[partition] = FakePartition(partition, leader)
        self.image.topics[name] = replace(topic, partitions=partitions)
        for listener in self._listeners:
            listener()

    async def ensure_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        internal: bool = False,
    ) -> FakeTopic:
        if self.fail_creation:
            raise RuntimeError("injected: not enough brokers")
        self.created.append((name, num_partitions, replication_factor, dict(configs), internal))
        await asyncio.sleep(0)
        existing = self.image.topics.get(name)
        return existing or self.add_topic(name, num_partitions, internal=internal)


def async_test(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run an async test function (parametrized or not) on a fresh event loop."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def fast_config(**overrides: Any) -> GroupCoordinatorConfig:
    """Kafka's defaults with no initial rebalance delay and few partitions, plus overrides."""
    settings: dict[str, Any] = {
        "group_initial_rebalance_delay_ms": 0,
        "offsets_topic_num_partitions": 4,
    }
    settings.update(overrides)
    return GroupCoordinatorConfig(**settings)


async def start_coordinator(
    config: GroupCoordinatorConfig | None = None,
    core: FakeCore | None = None,
    controller: FakeController | None = None,
    clock: FakeClock | None = None,
) -> GroupCoordinator:
    """A loaded coordinator over an existing offsets topic led by this broker."""
    config = config or fast_config()
    controller = controller or FakeController()
    if OFFSETS_TOPIC not in controller.image.topics:
        controller.add_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, internal=True)
    coordinator = GroupCoordinator(
        config, core or FakeCore(), controller, clock or FakeClock(), asyncio.get_running_loop()
    )
    coordinator.start()
    await coordinator.wait_loaded()
    return coordinator


def join_request(
    group_id: str = "group",
    member_id: str = "",
    *,
    protocols: Sequence[tuple[str, bytes]] = (("range", b"range-metadata"),),
    protocol_type: str = "consumer",
    group_instance_id: str | None = None,
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 30_000,
    client_id: str = "client",
    require_known_member_id: bool = False,
    supports_skip_assignment: bool = False,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        protocol_type=protocol_type,
        protocols=tuple(protocols),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id=client_id,
        client_host="/127.0.0.1",
        require_known_member_id=require_known_member_id,
        supports_skip_assignment=supports_skip_assignment,
    )


def sync_request(
    group_id: str,
    member_id: str,
    generation_id: int,
    assignments: Mapping[str, bytes] | None = None,
    group_instance_id: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=dict(assignments or {}),
    )


async def begin(work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start `work` and let it run until it parks (e.g. a JoinGroup waiting for its rebalance)."""
    task = asyncio.ensure_future(work)
    await asyncio.sleep(0)
    return task


async def form_stable_group(
    coordinator: GroupCoordinator,
    clock: FakeClock,
    group_id: str,
    members: int,
    **join: Any,
) -> list[JoinGroupResult]:
    """Join `members` new members, let the leader assign b"assignment-<i>", sync everyone."""
    instance_ids = join.pop("group_instance_ids", None)
    joins = [
        await begin(
            coordinator.join_group(
                join_request(
                    group_id,
                    client_id=f"client-{i}",
                    group_instance_id=instance_ids[i] if instance_ids else None,
                    **join,
                )
            )
        )
        for i in range(members)
    ]
    clock.advance(coordinator.config.group_initial_rebalance_delay_ms)
    results = [await task for task in joins]
    assert all(r.error is ErrorCode.none for r in results), results
    assignments = {r.member_id: f"assignment-{i}".encode() for i, r in enumerate(results)}
    syncs = [
        await begin(
            coordinator.sync_group(
                sync_request(
                    group_id,
                    r.member_id,
                    r.generation_id,
                    assignments if r.member_id == r.leader_id else None,
                )
            )
        )
        for r in results
    ]
    for sync in syncs:
        assert (await sync).error is ErrorCode.none
    return results


def consumer_subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (what Java consumers send as protocol metadata)."""
    writer = Writer()
    writer.int16(0)
    writer.int32(len(topics))
    for topic in topics:
        writer.string(topic)
    writer.int32(-1)  # no user data
    return writer.getvalue()
