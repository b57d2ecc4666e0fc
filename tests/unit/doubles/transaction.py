"""In-memory stand-ins for the transaction coordinator's unit tests: a core that also hands out
producer ids and answers WriteTxnMarkers like the partition leaders would, and a controller
whose partitions carry leader epochs and whose image carries finalized features."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import build_entity, encode_entity
from krust.transaction.api import TransactionApis
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.markers import WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION
from krust.transaction.metadata import TopicPartition
from krust.transaction.records import TRANSACTION_STATE_TOPIC
from krust.transaction.settings import TransactionCoordinatorConfig
from krust.transaction.state import ControllerView

from .clock import FakeClock
from .group import FakeController, FakeCore, FakeImage, FakeTopic


@dataclass(frozen=True)
class SentMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class SentRequest:
    node_id: int
    markers: tuple[SentMarker, ...]
    thread: str = ""  # the thread that sent it


class FakeTxnCore(FakeCore):
    """FakeCore plus `next_producer_id` and `send_to_broker` (WriteTxnMarkers only).

    Every marker is answered NONE unless a test queued errors: `partition_errors[tp]` is a list
    of error codes answered one per request, `unreachable[node]` a count of requests that fail
    with ConnectionError. `hold`, when given, holds each request (already recorded in `sent`)
    until the event is set."""

    def __init__(self, first_producer_id: int = 1000) -> None:
        super().__init__()
        self._producer_ids = itertools.count(first_producer_id)
        self.sent: list[SentRequest] = []
        self.partition_errors: dict[TopicPartition, list[ErrorCode]] = {}
        self.unreachable: dict[int, int] = {}
        self.hold: threading.Event | None = None
        self._lock = threading.Lock()

    def next_producer_id(self) -> int:
        return next(self._producer_ids)

    def send_to_broker(self, node_id: int, api_key: int, version: int, body: bytes) -> bytes:
        assert (api_key, version) == (WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
        request: Any
        request, _ = entity_reader(load_request_schema(api_key, version))(body, 0)
        markers = tuple(
            SentMarker(
                int(m.producer_id),
                int(m.producer_epoch),
                bool(m.transaction_result),
                int(m.coordinator_epoch),
                frozenset(
                    TopicPartition(t.name, int(p)) for t in m.topics for p in t.partition_indexes
                ),
            )
            for m in request.markers
        )
        with self._lock:
            self.sent.append(SentRequest(node_id, markers, threading.current_thread().name))
        if self.hold is not None:
            self.hold.wait(10)
        with self._lock:
            if self.unreachable.get(node_id, 0) > 0:
                self.unreachable[node_id] -= 1
                raise ConnectionError(f"broker {node_id} unreachable")
            results = []
            for marker in markers:
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for partition in sorted(marker.partitions):
                    queued = self.partition_errors.get(partition)
                    error = queued.pop(0) if queued else ErrorCode.none
                    by_topic.setdefault(partition.topic, []).append(
                        {"partition_index": partition.partition, "error_code": error}
                    )
                results.append(
                    {
                        "producer_id": marker.producer_id,
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                    }
                )
        response_type = load_response_schema(api_key, version)
        return encode_entity(build_entity(response_type, {"markers": results}))


@dataclass(frozen=True)
class EpochPartition:
    partition: int
    leader: int
    leader_epoch: int = 0


@dataclass
class TxnImage(FakeImage):
    features: dict[str, int] = field(default_factory=dict)


class TxnController(FakeController):
    """FakeController whose partitions have leader epochs and whose image has features."""

    def __init__(self, node_id: int = 1, broker_ids: Sequence[int] = (1,)) -> None:
        super().__init__(node_id, broker_ids)
        self.image = TxnImage(self.image.node_id, self.image.brokers, self.image.topics)

    def add_topic(
        self, name: str, partitions: int, leader: int | None = None, internal: bool = False
    ) -> FakeTopic:
        owner = self.image.node_id if leader is None else leader
        views: Mapping[int, Any] = {p: EpochPartition(p, owner) for p in range(partitions)}
        topic = FakeTopic(name, views, internal=internal)
        self.image.topics[name] = topic
        return topic

    def move_leader(self, name: str, partition: int, leader: int) -> None:
        topic = self.image.topics[name]
        partitions: dict[int, Any] = dict(topic.partitions)
        old = partitions[partition]
        partitions[partition] = EpochPartition(partition, leader, old.leader_epoch + 1)
        self.image.topics[name] = replace(topic, partitions=partitions)
        for listener in self._listeners:
            listener()

    def delete_topic(self, name: str) -> None:
        del self.image.topics[name]


def fast_config(**overrides: int) -> TransactionCoordinatorConfig:
    settings: dict[str, int] = {"transaction_state_log_num_partitions": 4}
    settings.update(overrides)
    return TransactionCoordinatorConfig(**settings)


async def start_coordinator(
    config: TransactionCoordinatorConfig | None = None,
    core: FakeTxnCore | None = None,
    controller: TxnController | None = None,
    clock: FakeClock | None = None,
) -> TransactionCoordinator:
    """A loaded coordinator over an existing `__transaction_state` led by this broker."""
    config = config or fast_config()
    controller = controller or TxnController()
    if TRANSACTION_STATE_TOPIC not in controller.image.topics:
        controller.add_topic(
            TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions, internal=True
        )
    # TxnController's partitions are EpochPartitions, though FakeController's types say not.
    view = cast(ControllerView, controller)
    coordinator = TransactionCoordinator(
        config, core or FakeTxnCore(), view, clock or FakeClock(), asyncio.get_running_loop()
    )
    coordinator.start()
    await coordinator.state.wait_loaded()
    return coordinator


class Client:
    """Sends requests through the transaction APIs the way the bridge does: bytes in and out."""

    def __init__(self, apis: TransactionApis, internal: bool = False) -> None:
        self._handlers = {api_key: handler for api_key, _, _, handler in apis.routes()}
        self._internal = internal

    async def send(
        self, api_key: int, version: int, fields: dict[str, Any], decode: bool = True
    ) -> Any:
        """The response, encoded and decoded again; `decode=False` stops after encoding (kio
        refuses to read back the -1 timestamps Kafka sends for "none")."""
        encoded = encode_entity(build_entity(load_request_schema(api_key, version), fields))
        request, _ = entity_reader(load_request_schema(api_key, version))(encoded, 0)
        context = RequestContext(
            api_key, version, 1, "client", "127.0.0.1", internal=self._internal
        )
        response = await self._handlers[api_key](request, context)
        response_type = load_response_schema(api_key, version)
        assert type(response) is response_type
        encoded_response = encode_entity(response)
        if not decode:
            return response
        decoded, _ = entity_reader(response_type)(encoded_response, 0)
        return decoded
