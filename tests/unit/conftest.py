"""Unit-test fixtures: the source tree on sys.path and an in-memory stand-in for the Rust core."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

# The property tests (test_*_properties.py): a modest number of examples, so the layer stays
# fast, and neither a per-example deadline nor the slow-generation check, which a loaded 2-core
# machine would trip for no reason. HYPOTHESIS_PROFILE=thorough searches much longer, for a
# change to a codec, assignor or rule.
_LOADED_MACHINE = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("krust", max_examples=40, database=None, **_LOADED_MACHINE)
settings.register_profile("thorough", max_examples=2000, **_LOADED_MACHINE)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "krust"))

SOURCE_ROOT = Path(__file__).resolve().parents[2] / "python"
if str(SOURCE_ROOT) not in sys.path:
    sys.path.insert(0, str(SOURCE_ROOT))

T = TypeVar("T")
METADATA_PARTITION = ("__cluster_metadata", 0)
TIMEOUT = 5.0


class FakeCore:
    """The parts of `krust._core.Core` the Python services use, over in-memory logs.

    `reopen()` is a broker restart: a new core over the same stored logs. A metadata snapshot
    trims the metadata log below it, as retention would."""

    def __init__(
        self,
        logs: dict[tuple[str, int], list[dict[str, Any]]] | None = None,
        snapshots: dict[int, list[bytes]] | None = None,
    ) -> None:
        self.logs = logs if logs is not None else {}
        self.snapshots = snapshots if snapshots is not None else {}
        self.images: list[dict[str, Any]] = []
        self.deltas: list[dict[str, Any]] = []
        self.fail_appends = False
        self.client_quotas: list[tuple[list[tuple[str, str | None]], dict[str, float]]] = []
        self.connection_limits: tuple[int, int, dict[str, int], int] | None = None
        self.replication_throttled_rates: tuple[int, int] | None = None
        self.cleaner: tuple[int, int, int, float] | None = None
        self.scram_credentials: list[tuple[str, int, bytes, bytes, bytes, int]] = []
        self.node_id = 1

    def apply_metadata(self, image: dict[str, Any]) -> None:
        self.images.append(image)

    def set_scram_credentials(
        self, credentials: list[tuple[str, int, bytes, bytes, bytes, int]]
    ) -> None:
        self.scram_credentials = credentials

    def apply_metadata_delta(self, delta: dict[str, Any]) -> None:
        """Record the delta and apply it to the last image, as the core's cache does."""
        self.deltas.append(delta)
        image = dict(self.images[-1])
        image["metadata_offset"] = delta["metadata_offset"]
        image["controller_id"] = delta["controller_id"]
        if "log_defaults" in delta:
            image["log_defaults"] = delta["log_defaults"]
        if delta["brokers"] is not None:
            image["brokers"] = delta["brokers"]
        if delta["finalized_features"] is not None:
            image["finalized_features"] = delta["finalized_features"]
        deleted = set(delta["deleted_topic_ids"])
        topics = [topic for topic in image["topics"] if topic["topic_id"] not in deleted]
        for change in delta["topics"]:
            index = next((i for i, t in enumerate(topics) if t["name"] == change["name"]), None)
            if index is None or topics[index]["topic_id"] != change["topic_id"]:
                topics = [t for t in topics if t["name"] != change["name"]] + [change]
                continue
            partitions = {p["partition"]: p for p in topics[index]["partitions"]}
            partitions.update((p["partition"], p) for p in change["partitions"])
            topics[index] = {**change, "partitions": [partitions[i] for i in sorted(partitions)]}
        image["topics"] = topics
        self.images.append(image)

    def set_connection_limits(
        self,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        max_creation_rate: int,
    ) -> None:
        self.connection_limits = (
            max_connections,
            max_per_ip,
            dict(per_ip_overrides),
            max_creation_rate,
        )

    def set_replication_throttled_rates(self, leader: int, follower: int) -> None:
        self.replication_throttled_rates = (leader, follower)

    def set_client_telemetry_metrics(self, text: str) -> None:
        self.client_telemetry_metrics = text

    def set_alter_log_dirs_throttled_rate(self, rate: int) -> None:
        self.alter_log_dirs_throttled_rate = rate

    def reconfigure_cleaner(
        self,
        threads: int,
        dedupe_buffer_size: int,
        backoff_ms: int,
        io_max_bytes_per_second: float,
    ) -> None:
        self.cleaner = (threads, dedupe_buffer_size, backoff_ms, io_max_bytes_per_second)

    def set_client_quotas(
        self, quotas: Sequence[tuple[list[tuple[str, str | None]], dict[str, float]]]
    ) -> None:
        self.client_quotas = list(quotas)

    def charge_request_time(self, user: str, client_id: str, seconds: float) -> int:
        return 0

    def internal_append(
        self, topic: str, partition: int, records: Sequence[tuple[bytes | None, bytes | None]]
    ) -> int:
        if self.fail_appends:
            raise OSError(28, "No space left on device")
        log = self.logs.setdefault((topic, partition), [])
        base = len(log)
        for index, (key, value) in enumerate(records):
            log.append({"offset": base + index, "timestamp": 0, "key": key, "value": value})
        return base

    def internal_read(
        self, topic: str, partition: int, start_offset: int, max_bytes: int
    ) -> list[dict[str, Any]]:
        read, size = [], 0
        for record in self.logs.get((topic, partition), [])[start_offset:]:
            read.append(record)
            size += len(record["value"] or b"")
            if size >= max_bytes:
                break
        return read

    def log_end_offset(self, topic: str, partition: int) -> int:
        return len(self.logs.get((topic, partition), []))

    def log_start_offset(self, topic: str, partition: int) -> int:
        if topic == "__cluster_metadata" and self.snapshots:
            return max(self.snapshots)
        return 0

    # A single-voter controller quorum over the in-memory metadata log: what the core's
    # start_quorum/propose/trigger_metadata_snapshot do for a node that is the only voter.
    def start_quorum(
        self,
        apply: Callable[[list[tuple[int, int, bytes]]], None],
        snapshot: Callable[[], list[bytes]],
        load_snapshot: Callable[[int, list[bytes]], None],
        leader_changed: Callable[[int, int], None],
    ) -> None:
        self._quorum_apply, self._quorum_snapshot = apply, snapshot
        start = max(self.snapshots, default=0)
        if self.snapshots:
            load_snapshot(start, self.snapshots[start])
        stored = self.logs.get(METADATA_PARTITION, [])[start:]
        apply([(record["offset"], 1, record["value"]) for record in stored])
        leader_changed(self.node_id, 1)

    def propose(self, records: Sequence[bytes]) -> int:
        base = self.internal_append(*METADATA_PARTITION, [(None, value) for value in records])
        self._quorum_apply([(base + i, 1, value) for i, value in enumerate(records)])
        return base + len(records) - 1

    def trigger_metadata_snapshot(self) -> None:
        end_offset = self.log_end_offset(*METADATA_PARTITION)
        self.snapshots[end_offset] = self._quorum_snapshot()

    def set_active_controller(self, leader: int) -> None:
        self.active_controller = leader

    def set_broker_epoch(self, epoch: int) -> None:
        self.broker_epoch = epoch

    def send_to_controller(self, api_key: int, version: int, body: bytes) -> bytes:
        raise RuntimeError("this node is a quorum of one: its controller is in-process")

    def reopen(self) -> FakeCore:
        return FakeCore(self.logs, self.snapshots)

    @property
    def last_image(self) -> dict[str, Any]:
        return self.images[-1]


class FakeRequest:
    """A BridgeRequest: records whether it was answered or its connection closed."""

    def __init__(
        self, body: bytes, api_key: int = 20, api_version: int = 4, internal: bool = False
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = 7
        self.client_id = "test-client"
        self.client_host = "127.0.0.1"
        self.client_port = 50000
        self.client_software_name = "unknown"
        self.client_software_version = "unknown"
        self.principal = "User:ANONYMOUS"
        self.listener_name = "PLAINTEXT"
        self.security_protocol = "PLAINTEXT"
        self.internal = internal
        self.body = body
        self.response: bytes | None = None
        self.throttle_ms = 0
        self.closed = False
        self.done = threading.Event()

    def respond(self, body: bytes, throttle_ms: int = 0) -> None:
        self.response = body
        self.throttle_ms = throttle_ms
        self.done.set()

    def close_connection(self) -> None:
        self.closed = True
        self.done.set()

    def wait(self) -> FakeRequest:
        assert self.done.wait(TIMEOUT), "neither answered nor closed"
        return self


@pytest.fixture
def fake_core() -> FakeCore:
    return FakeCore()


class LoopRunner:
    """Runs coroutines on one event loop for the whole test (asyncio locks stay bound to it)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __call__(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)


@pytest.fixture
def run() -> Iterator[LoopRunner]:
    runner = LoopRunner()
    yield runner
    runner.loop.close()
