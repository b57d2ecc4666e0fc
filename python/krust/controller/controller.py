"""The controller: owns the metadata log and image, answers the topic and producer-id APIs.

Every change is appended to the metadata log (durable) before the new image is applied to
the core and the answer sent, so an acknowledged change survives a crash and a restart
replays to the same image (same topic ids)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.authorization import Authorization
from krust.bridge import Exposure, RequestContext
from krust.context import BrokerContext, CoreBroker
from krust.controller import acls, cluster_apis, configs, quota_apis, scram
from krust.controller.bootstrap import format_log_dirs, initial_records, registration_record
from krust.controller.broker_configs import EffectiveBrokerConfig
from krust.controller.features import (
    FeatureUpdate,
    UpgradeType,
    check_finalized_levels,
    plan_update_features,
)
from krust.controller.image import MetadataImage, TopicImage
from krust.controller.publisher import METADATA_TOPIC, MetadataPublisher
from krust.controller.records import (
    METADATA_VERSION_FEATURE,
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecord,
    NoOpRecord,
    ProducerIdsRecord,
    encode_record,
)
from krust.controller.topics import (
    PartitionsSpec,
    TopicSpec,
    plan_create_partitions,
    plan_create_topics,
    plan_delete_topics,
)
from krust.controller_requests import request_controller
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.protocol import make_response

if TYPE_CHECKING:
    from krust import _core
    from krust.controller.cluster_apis import ClusterControl

log = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
UPDATE_FEATURES = 57
ALLOCATE_PRODUCER_IDS = 67
PRODUCER_ID_BLOCK_SIZE = 1000
# How long a request to the active controller may take.
CONTROLLER_TIMEOUT_MS = 30_000
# How long a new active controller waits before trying its first commit again.
DUTIES_RETRY_S = 0.2
# How long a new active controller waits for its first record to be replayed before it checks
# that it still leads and proposes another.
DUTIES_CATCH_UP_TIMEOUT_S = 5.0
# How often start-up logs that it is still waiting for the quorum.
QUORUM_WAIT_LOG_S = 5.0
LONG_MAX = 2**63 - 1


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
        self, config: Mapping[str, Any], core: CoreBroker, publisher: MetadataPublisher
    ) -> None:
        self.publisher = publisher
        self._config = config
        self._core = core
        self._lock = asyncio.Lock()
        # The broker's authorizer; server.py sets the configured one.
        self.authorization = Authorization(None)
        # Broker lifecycle, elections and reassignments; `install` sets it.
        self.cluster: ClusterControl | None = None
        # Whether this node leads the quorum, and the task taking up or dropping the duties.
        self._leading = False
        self._duties: asyncio.Task[None] | None = None
        # Set by close: a metadata change after it (its own last commit's) takes up nothing.
        self._closed = False

    @classmethod
    def open(cls, config: Mapping[str, Any], core: CoreBroker) -> Controller:
        """Format the log dirs if needed, start the quorum and wait until the image holds
        what it committed, register this broker and push the image to the core. Blocking;
        runs before the server starts serving."""
        node_id = config["node.id"]
        cluster_id = format_log_dirs(
            config["log.dirs"],
            node_id,
            config["cluster.id"],
            shared=bool(config["controller.quorum.voters"]),
        )
        publisher = MetadataPublisher(config, core, MetadataImage.empty(cluster_id, node_id))
        core.start_quorum(
            publisher.apply, publisher.snapshot, publisher.load_snapshot, publisher.leader_changed
        )
        controller = cls(config, core, publisher)
        if config["controller.quorum.voters"]:
            # The quorum needs this node's controller listener, which serves only once this
            # returns: the image reaches the core when the quorum has a leader, and the broker
            # registers through the controller channel (krust.lifecycle_manager).
            publisher.publish_when_caught_up()
            return controller
        while not publisher.wait_caught_up(QUORUM_WAIT_LOG_S):
            log.info("waiting for the controller quorum to elect a leader")
        if core.log_end_offset(METADATA_TOPIC, 0) > 0:
            # A restart: the registration below must not land in a transaction a crash left
            # open (its records are separate entries, a crash can keep only some).
            controller._end_transaction_left_open(None)
        check_finalized_levels(controller.image.features)
        bootstrapped = METADATA_VERSION_FEATURE in controller.image.features
        records = [] if bootstrapped else initial_records()
        # A quorum of one registers its broker here. The broker epoch is the record's offset.
        first = controller.next_offset()
        records.append(registration_record(config, broker_epoch=first + len(records)))
        controller._propose_blocking(records)
        publisher.start_publishing()
        return controller

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
        values = _atomic(records)
        last = await asyncio.to_thread(self._core.propose, values)
        await self.publisher.wait_for(last)
        return last - len(records)

    def next_offset(self) -> int:
        """The offset the first record of the next commit gets, after its
        BeginTransactionRecord (Kafka's broker epochs are offsets)."""
        return self._core.log_end_offset(METADATA_TOPIC, 0) + 1

    def _propose_blocking(self, records: Sequence[MetadataRecord]) -> None:
        """Commit records before the event loop runs (start-up)."""
        if records:
            last = self._core.propose(_atomic(records))
            # The last record ends the transaction: replayed, the image holds them all.
            self.publisher.wait_replayed_blocking(last, None)

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
                        self._end_transaction_left_open, DUTIES_CATCH_UP_TIMEOUT_S
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

    def _end_transaction_left_open(self, timeout: float | None) -> None:
        """Blocking: replay the log up to a record of this leader's epoch, then abort a
        metadata transaction (KIP-868) that the last controller, or this node before a crash,
        left open. Right after an election the image can lag the log: it may still show a
        transaction the log has ended (an abort then would stop every node's replay) or not
        yet show one the log leaves open. Kafka's raft client tells its controller of a
        leadership only once the controller has caught up; here a NoOpRecord of this epoch,
        once replayed, marks that point. TimeoutError after `timeout` seconds of waiting."""
        barrier = self._core.propose([encode_record(NoOpRecord())])
        self.publisher.wait_replayed_blocking(barrier, timeout)
        if self.publisher.in_transaction:
            abort = AbortTransactionRecord(reason="controller failover")
            last = self._core.propose([encode_record(abort)])
            self.publisher.wait_replayed_blocking(last, timeout)

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

    async def create_topics(self, request: Any, context: RequestContext) -> Any:
        specs = [
            TopicSpec(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=tuple(
                    (a.partition_index, tuple(a.broker_ids)) for a in topic.assignments
                ),
                configs=tuple((c.name, c.value) for c in topic.configs),
            )
            for topic in request.topics
        ]
        # As Kafka: CREATE on the cluster, or else on each topic.
        names = [spec.name for spec in specs]
        creatable = set(names)
        if not await self.authorization.allowed(context, AclOperation.CREATE, ResourceType.CLUSTER):
            creatable = await self.authorization.allowed_names(
                context, AclOperation.CREATE, ResourceType.TOPIC, names
            )
        async with self._lock:
            allowed = [spec for spec in specs if spec.name in creatable]
            plan = plan_create_topics(self.image, self.broker_config(), allowed)
            if plan.records and not request.validate_only:
                await self.commit(plan.records)
        results = plan.results + _refused(n for n in names if n not in creatable)
        # v5+ answers the new topics' configs, only to who may DESCRIBE_CONFIGS them.
        describable = await self.authorization.allowed_names(
            context, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names
        )
        for result in results:
            if result["name"] not in describable:
                result.update(topic_config_error_code=ErrorCode.topic_authorization_failed)
                result.update(configs=[])
        return make_response(CREATE_TOPICS, context.api_version, {"topics": results})

    async def delete_topics(self, request: Any, context: RequestContext) -> Any:
        entries: list[tuple[str | None, uuid.UUID | None]] = [
            (name, None) for name in getattr(request, "topic_names", ())
        ]
        entries += [(topic.name, topic.topic_id) for topic in getattr(request, "topics", ())]
        # As Kafka: DELETE on each topic, named or given by id.
        by_id = self.image.topics_by_id
        named = [
            (name if topic_id is None or topic_id not in by_id else by_id[topic_id].name, topic_id)
            for name, topic_id in entries
        ]
        deletable = await self.authorization.allowed_names(
            context, AclOperation.DELETE, ResourceType.TOPIC, (n for n, _ in named if n)
        )
        refused = [
            {"name": name, "topic_id": topic_id or uuid.UUID(int=0)}
            for name, topic_id in named
            if name and name not in deletable
        ]
        allowed = [
            e for e, (name, _) in zip(entries, named, strict=True) if not name or name in deletable
        ]
        async with self._lock:
            plan = plan_delete_topics(self.image, self._config, context.api_version, allowed)
            if plan.records:
                await self.commit(plan.records)
        results = plan.results + [
            {**r, "error_code": ErrorCode.topic_authorization_failed, "error_message": None}
            for r in refused
        ]
        return make_response(DELETE_TOPICS, context.api_version, {"responses": results})

    async def create_partitions(self, request: Any, context: RequestContext) -> Any:
        specs = [
            PartitionsSpec(
                name=topic.name,
                count=topic.count,
                assignments=None
                if topic.assignments is None
                else tuple(tuple(a.broker_ids) for a in topic.assignments),
            )
            for topic in request.topics
        ]
        # As Kafka: ALTER on each topic.
        alterable = await self.authorization.allowed_names(
            context, AclOperation.ALTER, ResourceType.TOPIC, (spec.name for spec in specs)
        )
        async with self._lock:
            allowed = [spec for spec in specs if spec.name in alterable]
            plan = plan_create_partitions(self.image, allowed)
            if plan.records and not request.validate_only:
                await self.commit(plan.records)
        results = plan.results + _refused(s.name for s in specs if s.name not in alterable)
        return make_response(CREATE_PARTITIONS, context.api_version, {"results": results})

    async def update_features(self, request: Any, context: RequestContext) -> Any:
        """Finalize feature levels (KIP-584): all updates or none, as Kafka's QuorumController."""
        version = context.api_version
        # As Kafka's ControllerApis: ALTER on the cluster.
        if not await self.authorization.allowed(context, AclOperation.ALTER, ResourceType.CLUSTER):
            refused = {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
            return make_response(UPDATE_FEATURES, version, refused)
        updates = {
            update.feature: FeatureUpdate(
                update.feature,
                update.max_version_level,
                # v0's allow_downgrade asks for a safe downgrade (KIP-778).
                (UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE)
                if version == 0
                else UpgradeType.from_code(update.upgrade_type),
            )
            for update in request.feature_updates
        }
        async with self._lock:
            plan = plan_update_features(self.image.features, updates.values(), self.image.node_id)
            if plan.records and not getattr(request, "validate_only", False):
                await self.commit(plan.records)
        if plan.message is not None:
            message = (
                "The update failed for all features since the following feature had an error: "
                + plan.message
            )
            fields: dict[str, Any] = {"error_code": plan.error, "error_message": message}
        else:
            # Kafka answers per feature only on success, with Errors.NONE's message.
            results = [
                {"feature": name, "error_code": plan.error, "error_message": "NONE"}
                for name in updates
            ]
            fields = {"error_code": plan.error, "error_message": None, "results": results}
        return make_response(UPDATE_FEATURES, version, fields)

    async def allocate_producer_ids(self, request: Any, context: RequestContext) -> Any:
        """Hand the core the next block of producer ids (Kafka's ProducerIdControlManager)."""

        def answer(error: ErrorCode, start: int = -1, length: int = 0) -> Any:
            fields = {"error_code": error, "producer_id_start": start, "producer_id_len": length}
            return make_response(ALLOCATE_PRODUCER_IDS, context.api_version, fields)

        # As Kafka's ControllerApis: brokers only (CLUSTER_ACTION on the cluster); the core's
        # own requests of a quorum of one pass.
        allowed = await self.authorization.allowed(
            context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER
        )
        if not allowed:
            return answer(ErrorCode.cluster_authorization_failed)
        broker = self.image.brokers.get(request.broker_id)
        # The core does not learn its broker epoch; -1 means "do not check".
        if broker is None or request.broker_epoch not in (-1, broker.epoch):
            return answer(ErrorCode.stale_broker_epoch)
        async with self._lock:
            start = self.image.next_producer_id
            if start > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
                return answer(ErrorCode.unknown_server_error)
            record = ProducerIdsRecord(
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
            )
            await self.commit([record])
        return answer(ErrorCode.none, start, PRODUCER_ID_BLOCK_SIZE)


def _atomic(records: Sequence[MetadataRecord]) -> list[bytes]:
    """The records' values in a metadata transaction (KIP-868): each is its own Raft entry,
    and a new leader may commit only some of them, so they apply together at the
    EndTransactionRecord or not at all. One record is wrapped too, so that the offsets a
    commit gives are known before it (`next_offset`)."""
    values = [encode_record(record) for record in records]
    begin = BeginTransactionRecord(name=f"{len(values)} records")
    return [encode_record(begin), *values, encode_record(EndTransactionRecord())]


def _refused(names: Any) -> list[dict[str, Any]]:
    """The results of topics the principal may not act on (Kafka's message)."""
    return [
        {
            "name": name,
            "error_code": ErrorCode.topic_authorization_failed,
            "error_message": "Authorization failed.",
        }
        for name in names
    ]


def install(ctx: BrokerContext) -> Controller:
    """Route the controller's APIs (versions Kafka 4 serves) to `ctx.controller`."""
    controller = ctx.controller
    register, forwarded = ctx.dispatcher.register, Exposure.FORWARDED
    register(CREATE_TOPICS, 2, 7, controller.create_topics, exposure=forwarded)
    register(DELETE_TOPICS, 1, 6, controller.delete_topics, exposure=forwarded)
    register(CREATE_PARTITIONS, 0, 3, controller.create_partitions, exposure=forwarded)
    register(UPDATE_FEATURES, 0, 2, controller.update_features, exposure=forwarded)
    register(
        ALLOCATE_PRODUCER_IDS,
        0,
        0,
        controller.allocate_producer_ids,
        exposure=Exposure.CONTROLLER,
    )
    configs.install(controller, ctx.dispatcher.register)
    acls.install(controller, ctx.authorization, ctx.dispatcher.register)
    quota_apis.install(controller, ctx.dispatcher.register)
    scram.install(controller, ctx.dispatcher.register)
    controller.cluster = cluster_apis.install(controller, ctx.dispatcher)
    ctx.dispatcher.loop.call_soon_threadsafe(controller.watch_leadership)
    return controller
