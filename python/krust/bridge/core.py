"""The core (the extension's `krust._core.Core`) as the Python services see it: the methods
they call, as a Protocol, so that unit tests can hand them in-memory fakes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from krust import _core


class ConnectionLimitsCore(Protocol):
    """How the core takes the connection limits in force (krust.security.connection_limits)."""

    def set_connection_limits(
        self,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        max_creation_rate: int,
    ) -> None: ...


class ServicesCore(ConnectionLimitsCore, Protocol):
    """The part of `krust._core.Core` services use (unit tests pass in-memory fakes)."""

    def apply_metadata(self, image: _core.MetadataImage) -> None: ...
    def apply_metadata_delta(self, delta: _core.MetadataDelta) -> None: ...
    def set_scram_credentials(
        self, credentials: list[tuple[str, int, bytes, bytes, bytes, int]]
    ) -> None: ...
    def internal_append(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        producer: tuple[int, int] | None = None,
    ) -> int: ...
    def internal_read(
        self, topic: str, partition: int, start_offset: int, max_bytes: int
    ) -> list[_core.StoredRecord]: ...
    def log_end_offset(self, topic: str, partition: int) -> int: ...
    def write_txn_markers(
        self, markers: Sequence[tuple[str, int, int, int, int, bool]]
    ) -> list[int]: ...
    def next_producer_id(self) -> int: ...
    def send_to_broker(self, node_id: int, api_key: int, version: int, body: bytes) -> bytes: ...
    def log_start_offset(self, topic: str, partition: int) -> int: ...
    def start_quorum(
        self,
        apply: Callable[[list[tuple[int, int, bytes]]], None],
        snapshot: Callable[[], list[bytes] | None],
        load_snapshot: Callable[[int, list[bytes]], None],
        leader_changed: Callable[[int, int], None],
    ) -> None: ...
    def propose(self, records: Sequence[bytes]) -> int: ...
    def trigger_metadata_snapshot(self) -> None: ...
    def set_active_controller(self, leader: int) -> None: ...
    def send_to_controller(self, api_key: int, version: int, body: bytes) -> bytes: ...
    def set_broker_epoch(self, epoch: int) -> None: ...
    def set_client_quotas(
        self, quotas: Sequence[tuple[list[tuple[str, str | None]], dict[str, float]]]
    ) -> None: ...
    def set_replication_throttled_rates(self, leader: int, follower: int) -> None: ...
    def set_client_telemetry_metrics(self, text: str) -> None: ...
    def set_alter_log_dirs_throttled_rate(self, rate: int) -> None: ...
    def reconfigure_cleaner(
        self,
        threads: int,
        dedupe_buffer_size: int,
        backoff_ms: int,
        io_max_bytes_per_second: float,
    ) -> None: ...
