"""The controller: owns the metadata log and image, commits changes through the quorum and
takes up the active controller's duties (its APIs: krust.controller.apis).

Every change is appended to the metadata log (durable) before the new image is applied to
the core and the answer sent, so an acknowledged change survives a crash and a restart
replays to the same image (same topic ids)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from krust.bridge.controller_requests import request_controller
from krust.bridge.core import ServicesCore
from krust.controller.bootstrap import initial_records
from krust.controller.broker_configs import EffectiveBrokerConfig
from krust.controller.image import MetadataImage, TopicImage
from krust.controller.meta_properties import format_node
from krust.controller.publisher import MetadataPublisher
from krust.controller.records import METADATA_VERSION_FEATURE, MetadataRecord
from krust.controller.startup import atomic, end_transaction_left_open, next_offset, open_metadata
from krust.controller.topics import TopicSpec, plan_create_topics
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust import _core

log = logging.getLogger(__name__)

CREATE_TOPICS = 19
# How long a request to the active controller may take.
CONTROLLER_TIMEOUT_MS = 30_000
# How long a new active controller waits before trying its first commit again.
DUTIES_RETRY_S = 0.2
# How long a new active controller waits for its first record to be replayed before it checks
# that it still leads and proposes another.
DUTIES_CATCH_UP_TIMEOUT_S = 5.0


class ActiveDuties(Protocol):
    """What the controller starts and stops of the active controller's duties (broker
    lifecycle, elections, reassignments: `cluster_apis.ClusterControl`)."""

    def activate(self) -> None: ...
    async def close(self) -> None: ...


class TopicCreationError(Exception):
    """`ensure_topic` could not create a topic; carries the Kafka error code."""

    def __init__(self, name: str, error: ErrorCode, message: str | None) -> None:
        super().__init__(f"cannot create topic {name}: {error.name}: {message}")
        self.error = error


class Controller:
    """The metadata state machine: plans changes against the committed image and proposes
    their records to the controller quorum. Only the quorum's leader (the active controller)
    can commit; the image is every node's, kept by the publisher."""

    def __init__(
        self, config: Mapping[str, Any], core: ServicesCore, publisher: MetadataPublisher
    ) -> None:
        self.publisher = publisher
        self._config = config
        self._core = core
        self._lock = asyncio.Lock()
        # The broker's authorizer; server.py sets the configured one.
        self.authorization = Authorization(None)
        # Broker lifecycle, elections and reassignments; `install` sets it.
        self.cluster: ActiveDuties | None = None
        # Whether this node leads the quorum, and the task taking up or dropping the duties.
        self._leading = False
        self._duties: asyncio.Task[None] | None = None
        # Set by close: a metadata change after it (its own last commit's) takes up nothing.
        self._closed = False

    @classmethod
    def open(cls, config: Mapping[str, Any], core: ServicesCore) -> Controller:
        """Format the log dirs and `startup.open_metadata`, then the controller over its
        publisher. Blocking."""
        return cls(config, core, open_metadata(config, core, format_node(config)))

    @property
    def config(self) -> Mapping[str, Any]:
        """The broker's static configuration."""
        return self._config

    @property
    def image(self) -> MetadataImage:
        """The committed metadata as this node has applied it."""
        return self.publisher.image

    def core_image(self) -> _core.MetadataImage:
        """The whole image as the core takes it, with the broker defaults of topic configs."""
        return self.publisher.core_image()

    def broker_config(self) -> EffectiveBrokerConfig:
        """This broker's config in force: static values under its dynamic broker configs."""
        return self.publisher.broker_config()

    @property
    def lock(self) -> asyncio.Lock:
        """Held while a change is planned against the image and committed."""
        return self._lock

    async def commit(self, records: Sequence[MetadataRecord]) -> int:
        """Commit records through the quorum and wait until the image holds them; the
        offset of the first (-1 for none). Hold `lock`."""
        if not records:
            return -1
        values = atomic(records)
        last = await asyncio.to_thread(self._core.propose, values)
        await self.publisher.wait_for(last)
        return last - len(records)

    def next_offset(self) -> int:
        """The offset the first record of the next commit gets, after its
        BeginTransactionRecord (Kafka's broker epochs are offsets)."""
        return next_offset(self._core)

    async def close(self) -> None:
        """Stop the active controller's duties."""
        self._closed = True
        self._leading = False
        if self._duties is not None:
            await asyncio.gather(self._duties, return_exceptions=True)
        if self.cluster is not None:
            await self.cluster.close()

    def on_metadata_change(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the running event loop after each metadata change."""
        self.publisher.add_listener(lambda _image: callback())

    def watch_leadership(self) -> None:
        """On the event loop: take up the active controller's duties while this node leads
        the quorum, and drop them when another does."""
        self.publisher.add_listener(lambda _image: self._leadership_changed())
        self._leadership_changed()

    def _leadership_changed(self) -> None:
        leading = self.publisher.leader_id == self.image.node_id and not self._closed
        if leading == self._leading:
            return
        self._leading = leading
        previous = self._duties
        self._duties = asyncio.get_running_loop().create_task(
            self._take_up_duties(previous) if leading else self._drop_duties(previous)
        )

    async def _take_up_duties(self, previous: asyncio.Task[None] | None) -> None:
        """Become the active controller: end a metadata transaction the last one left open
        (KIP-868), bootstrap an empty log, then fence brokers and balance leaders."""
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        while True:
            try:
                async with self._lock:
                    await asyncio.to_thread(
                        end_transaction_left_open,
                        self._core,
                        self.publisher,
                        DUTIES_CATCH_UP_TIMEOUT_S,
                    )
                    if METADATA_VERSION_FEATURE not in self.image.features:
                        await self.commit(initial_records())
                break
            except Exception as error:
                # Openraft may not take writes yet right after the election (or the
                # leadership was lost again): try again while this node leads.
                if not self._leading:
                    return
                log.info("the active controller cannot commit yet: %s", error)
                await asyncio.sleep(DUTIES_RETRY_S)
        log.info("this node is the active controller (epoch %d)", self.publisher.leader_epoch)
        if self.cluster is not None and self._leading:
            self.cluster.activate()

    async def _drop_duties(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        if self.cluster is not None:
            await self.cluster.close()

    async def ensure_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        internal: bool = False,
    ) -> TopicImage:
        """Create the topic if absent (as CreateTopics would); returns once the image with it
        has been applied to the core. Raises TopicCreationError if it cannot be created."""
        if internal:
            self.publisher.mark_internal(name)
        if self.publisher.leader_id != self.image.node_id:
            return await self._create_through_controller(
                name, num_partitions, replication_factor, configs
            )
        async with self._lock:
            existing = self.image.topics.get(name)
            if existing is not None:
                return existing
            spec = TopicSpec(name, num_partitions, replication_factor, (), tuple(configs.items()))
            plan = plan_create_topics(self.image, self.broker_config(), [spec])
            result = plan.results[0]
            if result["error_code"] != ErrorCode.none:
                raise TopicCreationError(name, result["error_code"], result["error_message"])
            await self.commit(plan.records)
            return self.image.topics[name]

    async def _create_through_controller(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicImage:
        """`ensure_topic` on a node that is not the active controller: a CreateTopics to the
        active one, then wait until the topic is in this node's image."""
        existing = self.image.topics.get(name)
        if existing is not None:
            return existing
        topic = {
            "name": name,
            "num_partitions": num_partitions,
            "replication_factor": replication_factor,
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }
        fields = {"topics": [topic], "timeout": CONTROLLER_TIMEOUT_MS}
        response = await request_controller(self._core, CREATE_TOPICS, 7, fields)
        (result,) = response.topics
        if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            raise TopicCreationError(name, result.error_code, result.error_message)
        try:
            await asyncio.wait_for(
                self.publisher.wait_until(lambda image: name in image.topics),
                CONTROLLER_TIMEOUT_MS / 1000,
            )
        except TimeoutError:
            raise TopicCreationError(
                name, ErrorCode.request_timed_out, "not replicated here"
            ) from None
        return self.image.topics[name]
