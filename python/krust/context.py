"""BrokerContext: what every service gets when it installs itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from krust.security.connection_limits import ConnectionLimitsCore

if TYPE_CHECKING:
    from krust import _core
    from krust.bridge import Dispatcher
    from krust.controller.controller import Controller
    from krust.group.api_membership import TransactionCoordinatorLocator
    from krust.security.authorization import Authorization


class CoreBroker(ConnectionLimitsCore, Protocol):
    """The part of `krust._core.Broker` services use (unit tests pass in-memory fakes)."""

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


def _no_authorizer() -> Authorization:
    from krust.security.authorization import Authorization

    return Authorization(None)


@dataclass
class BrokerContext:
    config: Mapping[str, Any]  # validated values by Kafka name, e.g. config["node.id"]
    core: CoreBroker
    controller: Controller
    dispatcher: Dispatcher
    authorization: Authorization = field(default_factory=_no_authorizer)
    # Set by krust.transaction's install (before the group coordinator's, which serves
    # FindCoordinator for both key types).
    transactions: TransactionCoordinatorLocator | None = None
