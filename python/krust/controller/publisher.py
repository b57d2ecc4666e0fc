"""Every node's view of the committed metadata (Kafka's MetadataLoader and
BrokerMetadataPublisher): what the controller quorum commits is replayed into the image here,
and the core gets what changed.

The quorum calls `load_snapshot`, `apply`, `snapshot` and `leader_changed` on one dedicated
thread, in log order (docs/quorum.md). Services read `image` from the event loop: images are
immutable, so a reader always sees a whole one. The controller waits with `wait_for` until
its own proposals are part of the image.

The replay runs before the port opens, before any event loop exists, so asyncio is imported
only by the methods that run on one (docs/python-services.md, "Start-up order")."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from krust.bridge.core import ServicesCore
from krust.controller.broker_configs import (
    EffectiveBrokerConfig,
    push_cleaner_config,
    push_replication_throttled_rates,
)
from krust.controller.client_quotas import core_client_quotas
from krust.controller.image import ImageBuilder, MetadataImage, core_credentials, to_core_image
from krust.controller.records import (
    MetadataRecord,
    MetadataRecordError,
    decode_record,
    encode_record,
)
from krust.controller.snapshots import SnapshotSchedule, image_records
from krust.security.connection_limits import push_connection_limits

if TYPE_CHECKING:
    import asyncio

    from krust import _core

log = logging.getLogger(__name__)
METADATA_TOPIC = "__cluster_metadata"

Listener = Callable[[MetadataImage], None]


class MetadataPublisher:
    """Replays committed metadata records into the image and publishes it to the core."""

    def __init__(self, config: Mapping[str, Any], core: ServicesCore, image: MetadataImage) -> None:
        self.image = image
        self._config = config
        self._core = core
        self._internal_topics: set[str] = set()
        # A metadata transaction (KIP-868) still open after the last records replayed.
        self._transaction: list[tuple[int, MetadataRecord]] | None = None
        # Serialises replays (quorum thread) with start_publishing and rebuilds (event loop).
        self._mutex = threading.Lock()
        self._advanced_condition = threading.Condition()
        self._publishing = False
        self._snapshots = SnapshotSchedule(config)
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Future[None]]] = []
        self._listeners: list[tuple[asyncio.AbstractEventLoop, Listener]] = []
        self._caught_up = threading.Event()
        self._publish_when_caught_up = False
        self.leader_id = -1
        self.leader_epoch = -1
        # The offset of the last record replayed, a metadata transaction's too (the image's
        # offset stays at its start until the transaction ends).
        self.replayed_offset = -1

    # -- the quorum's callbacks (its apply thread) ---------------------------------------------

    def load_snapshot(self, end_offset: int, values: Sequence[bytes]) -> None:
        """Start over from a snapshot standing in for every record below `end_offset`."""
        where = f"the snapshot ending at {end_offset}"
        records = [_decode(where, value) for value in values]
        base = MetadataImage.empty(self.image.cluster_id, self.image.node_id)
        with self._mutex:
            builder = ImageBuilder(base, self._internal_topics)
            builder.replay_all((end_offset - 1, record) for record in records)
            self._transaction = None
            self.replayed_offset = end_offset - 1
            self.image = builder.build()
            if self._publishing:
                # Before the image: the cleaner starts with the settings in force.
                push_cleaner_config(self._core, self.broker_config())
                self._core.apply_metadata(self.core_image())
                self._push_side_state()
        self._advanced()

    def apply(self, entries: Sequence[tuple[int, int, bytes]]) -> None:
        """Replay committed records, (offset, epoch, value) in offset order."""
        if not entries:
            return
        with self._mutex:
            builder = ImageBuilder(self.image, self._internal_topics, self._transaction)
            size = 0
            for offset, _epoch, value in entries:
                builder.replay(offset, _decode(f"offset {offset}", value))
                size += len(value)
            self._transaction = builder.transaction
            self.replayed_offset = entries[-1][0]
            self._publish(builder)
            self._snapshots.appended(size)
        self._maybe_snapshot()
        self._advanced()

    @property
    def in_transaction(self) -> bool:
        """Whether the log ends inside a metadata transaction (a new active controller
        aborts it)."""
        return self._transaction is not None

    def snapshot(self) -> list[bytes] | None:
        """The records of the image as applied now, for a snapshot of it; None inside a
        metadata transaction, whose records the image does not hold yet (KIP-868: no snapshot
        there, the quorum waits for the transaction's end)."""
        with self._mutex:
            if self._transaction is not None:
                return None
            return [encode_record(record) for record in image_records(self.image)]

    def leader_changed(self, leader_id: int, epoch: int) -> None:
        """The quorum has a new leader (-1: none known) in `epoch`."""
        self.leader_id, self.leader_epoch = leader_id, epoch
        self._core.set_active_controller(leader_id)
        if leader_id >= 0:
            self._caught_up.set()
            if self._publish_when_caught_up:
                self.start_publishing()
        self._advanced()

    # -- the services' side --------------------------------------------------------------------

    def wait_caught_up(self, timeout: float) -> bool:
        """Block until the quorum has a leader and everything committed before it is in the
        image (False after `timeout` seconds)."""
        return self._caught_up.wait(timeout)

    def wait_replayed_blocking(self, offset: int, timeout: float | None) -> None:
        """Block until the record at `offset` has been replayed, into the image or into the
        metadata transaction still open; TimeoutError after `timeout` seconds."""
        with self._advanced_condition:
            replayed = self._advanced_condition.wait_for(
                lambda: self.replayed_offset >= offset, timeout
            )
        if not replayed:
            raise TimeoutError(f"{METADATA_TOPIC} offset {offset} not replayed in {timeout} s")

    def publish_when_caught_up(self) -> None:
        """Start publishing (below) on the quorum's thread as soon as it has a leader and
        everything committed before it is in the image."""
        self._publish_when_caught_up = True
        if self._caught_up.is_set():
            self.start_publishing()

    def start_publishing(self) -> None:
        """From now on the core follows the image: the whole image once, then each change."""
        with self._mutex:
            if self._publishing:
                return
            self._publishing = True
            push_cleaner_config(self._core, self.broker_config())
            self._core.apply_metadata(self.core_image())
            self._push_side_state()

    def mark_internal(self, topic: str) -> None:
        """Report `topic` as internal from now on (rebuilding its image if it exists)."""
        with self._mutex:
            self._internal_topics.add(topic)
            if topic in self.image.topics and not self.image.topics[topic].internal:
                self._publish(ImageBuilder(self.image, self._internal_topics, self._transaction))

    def add_listener(self, listener: Listener) -> None:
        """Call `listener(image)` on the calling thread's event loop after each change."""
        import asyncio  # see the module's docstring

        self._listeners.append((asyncio.get_running_loop(), listener))

    async def wait_for(self, offset: int) -> None:
        """Return once the record at `offset` is part of the image."""
        await self.wait_until(lambda image: image.metadata_offset >= offset)

    async def wait_until(self, holds: Callable[[MetadataImage], bool]) -> None:
        """Return once `holds` is true of the image."""
        if holds(self.image):
            return
        import asyncio  # see the module's docstring

        future = asyncio.get_running_loop().create_future()
        with self._mutex:
            self._waiters.append((holds, future))
        self._advanced()
        await future

    def core_image(self) -> _core.MetadataImage:
        """The whole image as the core takes it, with the broker defaults of topic configs."""
        core_image = to_core_image(self.image)
        core_image["log_defaults"] = self.broker_config().topic_defaults()
        return core_image

    def broker_config(self) -> EffectiveBrokerConfig:
        """This broker's config in force: static values under its dynamic broker configs."""
        dynamic = self.image.broker_configs
        node = str(self.image.node_id)
        return EffectiveBrokerConfig(self._config, dynamic.get(node), dynamic.get(""))

    # -- internals -----------------------------------------------------------------------------

    def _publish(self, builder: ImageBuilder) -> None:
        """Build the next image; once publishing, send the core only what changed."""
        self.image = builder.build()
        if not self._publishing:
            return
        delta = builder.core_delta(self.image)
        if builder.broker_configs_changed:
            delta["log_defaults"] = self.broker_config().topic_defaults()
        self._core.apply_metadata_delta(delta)
        if builder.broker_configs_changed:
            push_connection_limits(self._core, self.broker_config())
            push_replication_throttled_rates(self._core, self.broker_config())
            push_cleaner_config(self._core, self.broker_config())
        if builder.client_quotas_changed:
            self._core.set_client_quotas(core_client_quotas(self.image.client_quotas))
        if builder.scram_credentials_changed:
            self._core.set_scram_credentials(core_credentials(self.image))

    def _push_side_state(self) -> None:
        self._core.set_client_quotas(core_client_quotas(self.image.client_quotas))
        push_connection_limits(self._core, self.broker_config())
        push_replication_throttled_rates(self._core, self.broker_config())
        self._core.set_scram_credentials(core_credentials(self.image))

    def _maybe_snapshot(self) -> None:
        """Ask the quorum for a snapshot when one is due (it calls `snapshot` back)."""
        if not self._snapshots.due():
            return
        self._snapshots.started()
        try:
            self._core.trigger_metadata_snapshot()
        except Exception as error:  # the log keeps every record: nothing is lost
            log.error("could not start a metadata snapshot: %s", error)

    def _advanced(self) -> None:
        """Wake the waiters the image now covers and tell the listeners."""
        image = self.image
        ready: list[asyncio.Future[None]] = []
        with self._mutex:
            waiting = self._waiters
            self._waiters = []
            for holds, future in waiting:
                if holds(image):
                    ready.append(future)
                else:
                    self._waiters.append((holds, future))
        with self._advanced_condition:
            self._advanced_condition.notify_all()
        for future in ready:
            _call_soon(future.get_loop(), _resolve, future)
        for loop, listener in self._listeners:
            _call_soon(loop, listener, image)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    # A closed loop means shutting down: nobody waits any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _decode(where: str, value: bytes) -> Any:
    try:
        return decode_record(value)
    except MetadataRecordError as error:
        raise MetadataRecordError(f"{METADATA_TOPIC} {where}: {error}") from None
