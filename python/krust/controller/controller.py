"""The controller: owns the metadata log and image, answers the topic and producer-id APIs.

Every change is appended to the metadata log (durable) before the new image is applied to
the core and the answer sent, so an acknowledged change survives a crash and a restart
replays to the same image (same topic ids)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.authorization import Authorization
from krust.bridge import RequestContext
from krust.connection_limits import push_connection_limits
from krust.context import BrokerContext, CoreBroker
from krust.controller import acls, cluster_apis, configs, quota_apis, scram
from krust.controller.bootstrap import format_log_dirs, initial_records, registration_record
from krust.controller.broker_configs import EffectiveBrokerConfig
from krust.controller.client_quotas import core_client_quotas
from krust.controller.features import (
    FeatureUpdate,
    UpgradeType,
    check_finalized_levels,
    plan_update_features,
)
from krust.controller.image import ImageBuilder, MetadataImage, TopicImage, to_core_image
from krust.controller.metadata_log import MetadataLog
from krust.controller.records import MetadataRecord, ProducerIdsRecord
from krust.controller.snapshots import SnapshotSchedule, image_records
from krust.controller.topics import (
    PartitionsSpec,
    TopicSpec,
    plan_create_partitions,
    plan_create_topics,
    plan_delete_topics,
)
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
LONG_MAX = 2**63 - 1


class TopicCreationError(Exception):
    """`ensure_topic` could not create a topic; carries the Kafka error code."""

    def __init__(self, name: str, error: ErrorCode, message: str | None) -> None:
        super().__init__(f"cannot create topic {name}: {error.name}: {message}")
        self.error = error


class Controller:
    """The metadata state machine of a single-node KRaft quorum."""

    def __init__(
        self, config: Mapping[str, Any], core: CoreBroker, log: MetadataLog, image: MetadataImage
    ) -> None:
        self.image = image
        self._config = config
        self._core = core
        self._log = log
        self._internal_topics: set[str] = set()
        self._lock = asyncio.Lock()
        self._snapshots = SnapshotSchedule(config)
        self._snapshot_task: asyncio.Task[None] | None = None
        # The broker's authorizer; server.py sets the configured one.
        self.authorization = Authorization(None)
        # Broker lifecycle, elections and reassignments; `install` sets it.
        self.cluster: ClusterControl | None = None

    @classmethod
    def open(cls, config: Mapping[str, Any], core: CoreBroker) -> Controller:
        """Format the log dirs if needed, replay the metadata log, register this broker and
        push the image to the core. Blocking; runs before the server starts serving."""
        node_id = config["node.id"]
        cluster_id = format_log_dirs(config["log.dirs"], node_id, config["cluster.id"])
        metadata_log = MetadataLog(core)
        replayed = ImageBuilder(MetadataImage.empty(cluster_id, node_id))
        start = 0
        snapshot = metadata_log.latest_snapshot()
        if snapshot is not None:
            start, snapshot_records = snapshot
            replayed.replay_all((start - 1, record) for record in snapshot_records)
        controller = cls(
            config, core, metadata_log, replayed.replay_all(metadata_log.read_from(start)).build()
        )
        check_finalized_levels(controller.image.features)
        end = metadata_log.end_offset()
        records = initial_records() if end == 0 else []
        # Kafka's broker epoch is the offset of the registration record.
        records.append(registration_record(config, broker_epoch=end + len(records)))
        controller._append(records)
        core.apply_metadata(controller.core_image())
        core.set_client_quotas(core_client_quotas(controller.image.client_quotas))
        push_connection_limits(core, controller.broker_config())
        core.set_scram_credentials(scram.core_credentials(controller.image))
        return controller

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

    @property
    def lock(self) -> asyncio.Lock:
        """Held while a change is planned against the image and committed."""
        return self._lock

    async def commit(self, records: Sequence[MetadataRecord]) -> int:
        """Append records (durable) and apply them to the image and the core; hold `lock`.
        Returns the offset of the first record (-1 for none)."""
        return await self._commit(records)

    def next_offset(self) -> int:
        """The offset the next committed record gets (Kafka's broker epochs are offsets)."""
        return self._log.end_offset()

    def _append(self, records: Sequence[MetadataRecord]) -> tuple[ImageBuilder, int]:
        """Append the records and move the image on; the builder knows what changed (an
        empty list rebuilds the image, e.g. after a topic became internal). Returns it and
        the first record's offset (-1 for none)."""
        builder = ImageBuilder(self.image, self._internal_topics)
        base = -1
        if records:
            base, size = self._log.append(records)
            self._snapshots.appended(size)
            builder.replay_all(zip(itertools.count(base), records))
        self.image = builder.build()
        return builder, base

    def _commit_now(self, records: Sequence[MetadataRecord]) -> int:
        """Append the records, then send the core only what they changed."""
        builder, base = self._append(records)
        delta = builder.core_delta(self.image)
        if builder.broker_configs_changed:
            delta["log_defaults"] = self.broker_config().topic_defaults()
        self._core.apply_metadata_delta(delta)
        if builder.broker_configs_changed:
            push_connection_limits(self._core, self.broker_config())
        if builder.client_quotas_changed:
            self._core.set_client_quotas(core_client_quotas(self.image.client_quotas))
        if builder.scram_credentials_changed:
            self._core.set_scram_credentials(scram.core_credentials(self.image))
        return base

    async def _commit(self, records: Sequence[MetadataRecord]) -> int:
        # The append fsyncs: keep the event loop free for other requests meanwhile.
        base = await asyncio.to_thread(self._commit_now, records)
        self._maybe_snapshot()
        return base

    def _maybe_snapshot(self) -> None:
        """Start writing a snapshot of the image in the background when one is due (one at
        a time; the image is immutable, so commits go on meanwhile)."""
        if self._snapshot_task is not None or not self._snapshots.due():
            return
        self._snapshots.started()
        image = self.image
        self._snapshot_task = asyncio.create_task(asyncio.to_thread(self._write_snapshot, image))
        self._snapshot_task.add_done_callback(self._snapshot_done)

    def _write_snapshot(self, image: MetadataImage) -> None:
        self._log.write_snapshot(image.metadata_offset + 1, image_records(image))

    def _snapshot_done(self, task: asyncio.Task[None]) -> None:
        self._snapshot_task = None
        error = None if task.cancelled() else task.exception()
        if error is not None:
            # The log keeps everything a snapshot would have replaced: nothing is lost.
            log.error("writing a metadata snapshot failed: %s", error)

    async def close(self) -> None:
        """Stop fencing brokers; let a snapshot being written finish before the core closes."""
        if self.cluster is not None:
            await self.cluster.close()
        if self._snapshot_task is not None:
            await asyncio.wait([self._snapshot_task])

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
        async with self._lock:
            if internal and name not in self._internal_topics:
                self._internal_topics.add(name)
                existing = self.image.topics.get(name)
                if existing is not None and not existing.internal:
                    await self._commit([])
            existing = self.image.topics.get(name)
            if existing is not None:
                return existing
            spec = TopicSpec(name, num_partitions, replication_factor, (), tuple(configs.items()))
            plan = plan_create_topics(self.image, self.broker_config(), [spec])
            result = plan.results[0]
            if result["error_code"] != ErrorCode.none:
                raise TopicCreationError(name, result["error_code"], result["error_message"])
            await self._commit(plan.records)
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
                await self._commit(plan.records)
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
                await self._commit(plan.records)
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
                await self._commit(plan.records)
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
                await self._commit(plan.records)
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

        # Registered internal-only, so the core never routes a client's request here; the
        # check keeps that true for any other caller too.
        if not context.internal:
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
            await self._commit([record])
        return answer(ErrorCode.none, start, PRODUCER_ID_BLOCK_SIZE)


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
    ctx.dispatcher.register(CREATE_TOPICS, 2, 7, controller.create_topics)
    ctx.dispatcher.register(DELETE_TOPICS, 1, 6, controller.delete_topics)
    ctx.dispatcher.register(CREATE_PARTITIONS, 0, 3, controller.create_partitions)
    ctx.dispatcher.register(UPDATE_FEATURES, 0, 2, controller.update_features)
    ctx.dispatcher.register(
        ALLOCATE_PRODUCER_IDS, 0, 0, controller.allocate_producer_ids, internal_only=True
    )
    configs.install(controller, ctx.dispatcher.register)
    acls.install(controller, ctx.authorization, ctx.dispatcher.register)
    quota_apis.install(controller, ctx.dispatcher.register)
    scram.install(controller, ctx.dispatcher.register)
    controller.cluster = cluster_apis.install(controller, ctx.dispatcher)
    ctx.dispatcher.loop.call_soon_threadsafe(controller.cluster.start)
    return controller
