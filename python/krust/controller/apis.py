"""The controller's topic, feature and producer-id APIs, and the routing of every API the
controller serves. Installed after the port opens (docs/python-services.md, "Start-up order"):
until then the core advertises them from `ADVERTISED` and their requests wait."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.controller import acls, cluster_apis, config_resources, configs, quota_apis, scram
from krust.controller.controller import CREATE_TOPICS
from krust.controller.features import FeatureUpdate, UpgradeType, plan_update_features
from krust.controller.records import ProducerIdsRecord
from krust.controller.topics import (
    PartitionsSpec,
    TopicSpec,
    plan_create_partitions,
    plan_create_topics,
    plan_delete_topics,
)
from krust.plugins.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from krust.bridge.context import BrokerContext
    from krust.controller.controller import Controller

DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
UPDATE_FEATURES = 57
ALLOCATE_PRODUCER_IDS = 67
PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


class ControllerApis:
    """CreateTopics, DeleteTopics, CreatePartitions, UpdateFeatures and AllocateProducerIds,
    planned against the controller's image and committed through it."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    async def create_topics(self, request: Any, context: RequestContext) -> Any:
        controller = self._controller
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
        if not await controller.authorization.allowed(
            context, AclOperation.CREATE, ResourceType.CLUSTER
        ):
            creatable = await controller.authorization.allowed_names(
                context, AclOperation.CREATE, ResourceType.TOPIC, names
            )
        async with controller.lock:
            allowed = [spec for spec in specs if spec.name in creatable]
            plan = plan_create_topics(controller.image, controller.broker_config(), allowed)
            if plan.records and not request.validate_only:
                await controller.commit(plan.records)
        results = plan.results + _refused(n for n in names if n not in creatable)
        # v5+ answers the new topics' configs, only to who may DESCRIBE_CONFIGS them.
        describable = await controller.authorization.allowed_names(
            context, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names
        )
        for result in results:
            if result["name"] not in describable:
                result.update(topic_config_error_code=ErrorCode.topic_authorization_failed)
                result.update(configs=[])
        return make_response(CREATE_TOPICS, context.api_version, {"topics": results})

    async def delete_topics(self, request: Any, context: RequestContext) -> Any:
        controller = self._controller
        entries: list[tuple[str | None, uuid.UUID | None]] = [
            (name, None) for name in getattr(request, "topic_names", ())
        ]
        entries += [(topic.name, topic.topic_id) for topic in getattr(request, "topics", ())]
        # As Kafka: DELETE on each topic, named or given by id.
        by_id = controller.image.topics_by_id
        named = [
            (name if topic_id is None or topic_id not in by_id else by_id[topic_id].name, topic_id)
            for name, topic_id in entries
        ]
        deletable = await controller.authorization.allowed_names(
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
        async with controller.lock:
            plan = plan_delete_topics(
                controller.image, controller.config, context.api_version, allowed
            )
            if plan.records:
                await controller.commit(plan.records)
        results = plan.results + [
            {**r, "error_code": ErrorCode.topic_authorization_failed, "error_message": None}
            for r in refused
        ]
        return make_response(DELETE_TOPICS, context.api_version, {"responses": results})

    async def create_partitions(self, request: Any, context: RequestContext) -> Any:
        controller = self._controller
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
        alterable = await controller.authorization.allowed_names(
            context, AclOperation.ALTER, ResourceType.TOPIC, (spec.name for spec in specs)
        )
        async with controller.lock:
            allowed = [spec for spec in specs if spec.name in alterable]
            plan = plan_create_partitions(controller.image, allowed)
            if plan.records and not request.validate_only:
                await controller.commit(plan.records)
        results = plan.results + _refused(s.name for s in specs if s.name not in alterable)
        return make_response(CREATE_PARTITIONS, context.api_version, {"results": results})

    async def update_features(self, request: Any, context: RequestContext) -> Any:
        """Finalize feature levels (KIP-584): all updates or none, as Kafka's QuorumController."""
        controller = self._controller
        version = context.api_version
        # As Kafka's ControllerApis: ALTER on the cluster.
        if not await controller.authorization.allowed(
            context, AclOperation.ALTER, ResourceType.CLUSTER
        ):
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
        async with controller.lock:
            plan = plan_update_features(
                controller.image.features, updates.values(), controller.image.node_id
            )
            if plan.records and not getattr(request, "validate_only", False):
                await controller.commit(plan.records)
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
        controller = self._controller

        def answer(error: ErrorCode, start: int = -1, length: int = 0) -> Any:
            fields = {"error_code": error, "producer_id_start": start, "producer_id_len": length}
            return make_response(ALLOCATE_PRODUCER_IDS, context.api_version, fields)

        # As Kafka's ControllerApis: brokers only (CLUSTER_ACTION on the cluster); the core's
        # own requests of a quorum of one pass.
        allowed = await controller.authorization.allowed(
            context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER
        )
        if not allowed:
            return answer(ErrorCode.cluster_authorization_failed)
        broker = controller.image.brokers.get(request.broker_id)
        # The core does not learn its broker epoch; -1 means "do not check".
        if broker is None or request.broker_epoch not in (-1, broker.epoch):
            return answer(ErrorCode.stale_broker_epoch)
        async with controller.lock:
            start = controller.image.next_producer_id
            if start > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
                return answer(ErrorCode.unknown_server_error)
            record = ProducerIdsRecord(
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
            )
            await controller.commit([record])
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
    apis = ControllerApis(controller)
    register, forwarded = ctx.dispatcher.register, Exposure.FORWARDED
    register(CREATE_TOPICS, 2, 7, apis.create_topics, exposure=forwarded)
    register(DELETE_TOPICS, 1, 6, apis.delete_topics, exposure=forwarded)
    register(CREATE_PARTITIONS, 0, 3, apis.create_partitions, exposure=forwarded)
    register(UPDATE_FEATURES, 0, 2, apis.update_features, exposure=forwarded)
    register(
        ALLOCATE_PRODUCER_IDS,
        0,
        0,
        apis.allocate_producer_ids,
        exposure=Exposure.CONTROLLER,
    )
    configs.install(controller, ctx.dispatcher.register)
    config_resources.install(controller, ctx.dispatcher.register)
    acls.install(controller, ctx.authorization, ctx.dispatcher.register)
    quota_apis.install(controller, ctx.dispatcher.register)
    scram.install(controller, ctx.dispatcher.register)
    controller.cluster = cluster_apis.install(controller, ctx.dispatcher)
    ctx.dispatcher.loop.call_soon_threadsafe(controller.watch_leadership)
    return controller
