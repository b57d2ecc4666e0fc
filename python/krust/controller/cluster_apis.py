"""The active controller's cluster APIs: BrokerRegistration, BrokerHeartbeat and AlterPartition
(from brokers only, CLUSTER_ACTION), ElectLeaders and AlterPartitionReassignments (ALTER on the
cluster), ListPartitionReassignments (DESCRIBE), and the periodic fencing of brokers whose
session lapsed. Each plans against `controller.image` under `controller.lock` and commits."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import Dispatcher, RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.controller.broker_lifecycle import (
    BrokerHeartbeatManager,
    BrokerState,
    Heartbeat,
    Registration,
    RegistrationError,
    StaleBrokerEpoch,
    check_broker_epoch,
    plan_fence,
    plan_heartbeat,
    plan_register_broker,
)
from krust.controller.reassignment import list_reassignments, plan_alter_reassignments
from krust.controller.records import METADATA_VERSION_FEATURE, BrokerEndpoint, BrokerFeature
from krust.controller.replication import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    IsrMember,
    PartitionAlteration,
    plan_alter_partition,
    plan_balance_leaders,
    plan_elect_leaders,
    unclean_election_enabled,
)
from krust.plugins.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from krust.controller.controller import Controller

log = logging.getLogger(__name__)

ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
ALTER_PARTITION = 56
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
# The fencing check never sleeps less than this, however close the next expiry.
MIN_CHECK_INTERVAL_MS = 50
# Kafka's QuorumController.maxElectionsPerImbalance: one leader balancing commit at most.
MAX_ELECTIONS_PER_IMBALANCE = 1000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClusterControl:
    """Broker lifecycle, elections and reassignments on the active controller."""

    def __init__(
        self,
        controller: Controller,
        clock: Callable[[], int] = monotonic_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._controller = controller
        self._sleep = sleep
        config = controller.broker_config()
        # auto.leader.rebalance.enable: how often preferred leaders are restored, or never.
        self.leader_balance_interval_s: float | None = (
            config["leader.imbalance.check.interval.seconds"]
            if config["auto.leader.rebalance.enable"]
            else None
        )
        self.leader_balancing: asyncio.Task[None] | None = None
        # A quorum of one registers its broker at open, which then sends no heartbeats: its
        # session never lapses. In a quorum of several every broker heartbeats.
        local = None if config["controller.quorum.voters"] else controller.image.node_id
        self.heartbeats = BrokerHeartbeatManager(
            config["broker.session.timeout.ms"], clock, local_node=local
        )
        self._fencing: asyncio.Task[None] | None = None

    def _unclean(self, topic: str) -> bool:
        controller = self._controller
        return unclean_election_enabled(controller.image, controller.broker_config(), topic)

    async def _allowed(self, context: RequestContext, operation: AclOperation) -> bool:
        authorization = self._controller.authorization
        return await authorization.allowed(context, operation, ResourceType.CLUSTER)

    async def register_broker(self, request: Any, context: RequestContext) -> Any:
        def answer(error: ErrorCode, epoch: int = -1) -> Any:
            fields = {"error_code": error, "broker_epoch": epoch}
            return make_response(BROKER_REGISTRATION, context.api_version, fields)

        if not await self._allowed(context, AclOperation.CLUSTER_ACTION):
            return answer(ErrorCode.cluster_authorization_failed)
        if METADATA_VERSION_FEATURE not in self._controller.image.features:
            # A new active controller that has not bootstrapped the log yet; the broker
            # tries again, as with any controller not ready.
            return answer(ErrorCode.not_controller)
        registration = Registration(
            broker_id=request.broker_id,
            cluster_id=request.cluster_id,
            incarnation_id=request.incarnation_id,
            listeners=tuple(
                BrokerEndpoint(
                    name=listener.name,
                    host=listener.host,
                    port=listener.port,
                    security_protocol=listener.security_protocol,
                )
                for listener in request.listeners
            ),
            features=tuple(
                BrokerFeature(
                    name=feature.name,
                    min_supported_version=feature.min_supported_version,
                    max_supported_version=feature.max_supported_version,
                )
                for feature in request.features
            ),
            rack=request.rack,
            is_migrating_zk_broker=getattr(request, "is_migrating_zk_broker", False),
        )
        controller = self._controller
        async with controller.lock:
            image = controller.image
            existing = image.brokers.get(registration.broker_id)
            try:
                records = plan_register_broker(
                    image, self.heartbeats, registration, controller.next_offset(), self._unclean
                )
            except RegistrationError as error:
                log.warning("refused the registration of broker %s: %s", request.broker_id, error)
                return answer(error.error)
            await controller.commit(records)
            registered = controller.image.brokers[registration.broker_id]
            new_incarnation = existing is None or (
                existing.registration is None
                or existing.registration.incarnation_id != registration.incarnation_id
            )
            self.heartbeats.register(registered.node_id, registered.fenced, new_incarnation)
        return answer(ErrorCode.none, registered.epoch)

    async def broker_heartbeat(self, request: Any, context: RequestContext) -> Any:
        def answer(error: ErrorCode, **fields: Any) -> Any:
            return make_response(
                BROKER_HEARTBEAT, context.api_version, {"error_code": error, **fields}
            )

        if not await self._allowed(context, AclOperation.CLUSTER_ACTION):
            return answer(ErrorCode.cluster_authorization_failed)
        heartbeat = Heartbeat(
            broker_id=request.broker_id,
            broker_epoch=request.broker_epoch,
            current_metadata_offset=request.current_metadata_offset,
            want_fence=request.want_fence,
            want_shut_down=request.want_shut_down,
        )
        controller = self._controller
        async with controller.lock:
            try:
                reply = plan_heartbeat(controller.image, self.heartbeats, heartbeat, self._unclean)
            except StaleBrokerEpoch as error:
                log.info("heartbeat of broker %s refused: %s", request.broker_id, error)
                return answer(ErrorCode.stale_broker_epoch)
            first = await controller.commit(reply.records)
            if reply.state is BrokerState.CONTROLLED_SHUTDOWN:
                end = (
                    first + len(reply.records) - 1
                    if reply.records
                    else controller.image.metadata_offset
                )
                self.heartbeats.entered_controlled_shutdown(heartbeat.broker_id, end)
        return answer(
            ErrorCode.none,
            is_caught_up=reply.is_caught_up,
            is_fenced=reply.state.fenced,
            should_shut_down=reply.state is BrokerState.SHUTDOWN_NOW,
        )

    async def alter_partition(self, request: Any, context: RequestContext) -> Any:
        def answer(error: ErrorCode, topics: list[dict[str, Any]] | None = None) -> Any:
            fields = {"error_code": error, "topics": topics or []}
            return make_response(ALTER_PARTITION, context.api_version, fields)

        if not await self._allowed(context, AclOperation.CLUSTER_ACTION):
            return answer(ErrorCode.cluster_authorization_failed)
        topics = [
            (
                topic.topic_id,
                [
                    PartitionAlteration(
                        partition=p.partition_index,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        new_isr=tuple(
                            IsrMember(m.broker_id, m.broker_epoch) for m in p.new_isr_with_epochs
                        )
                        if context.api_version >= 3
                        else tuple(IsrMember(b, -1) for b in p.new_isr),
                        leader_recovery_state=p.leader_recovery_state,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
        controller = self._controller
        async with controller.lock:
            try:
                check_broker_epoch(controller.image, request.broker_id, request.broker_epoch)
            except StaleBrokerEpoch as error:
                log.info("AlterPartition of broker %s refused: %s", request.broker_id, error)
                return answer(ErrorCode.stale_broker_epoch)
            plan = plan_alter_partition(controller.image, request.broker_id, topics, self._unclean)
            await controller.commit(plan.records)
        return answer(ErrorCode.none, plan.results)

    async def elect_leaders(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        election_type = getattr(request, "election_type", PREFERRED_ELECTION)
        requested = (
            None
            if request.topic_partitions is None
            else [(t.topic, tuple(t.partitions)) for t in request.topic_partitions]
        )

        def refuse(error: ErrorCode, message: str | None) -> Any:
            results = [
                {
                    "topic": topic,
                    "partition_result": [
                        {"partition_id": p, "error_code": error, "error_message": message}
                        for p in partitions
                    ],
                }
                for topic, partitions in requested or ()
            ]
            fields = {"error_code": error, "replica_election_results": results}
            return make_response(ELECT_LEADERS, version, fields)

        if not await self._allowed(context, AclOperation.ALTER):
            return refuse(ErrorCode.cluster_authorization_failed, None)
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            return refuse(ErrorCode.invalid_request, f"Unknown election type {election_type}")
        controller = self._controller
        async with controller.lock:
            records, results = plan_elect_leaders(controller.image, election_type, requested)
            await controller.commit(records)
        fields = {"error_code": ErrorCode.none, "replica_election_results": results}
        return make_response(ELECT_LEADERS, version, fields)

    async def alter_partition_reassignments(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        allow_change = getattr(request, "allow_replication_factor_change", True)
        topics = [
            (t.name, [(p.partition_index, p.replicas) for p in t.partitions])
            for t in request.topics
        ]
        if not await self._allowed(context, AclOperation.ALTER):
            error = ErrorCode.cluster_authorization_failed
            responses = [
                {
                    "name": name,
                    "partitions": [{"partition_index": i, "error_code": error} for i, _ in targets],
                }
                for name, targets in topics
            ]
            fields = {"error_code": error, "responses": responses}
            return make_response(ALTER_PARTITION_REASSIGNMENTS, version, fields)
        controller = self._controller
        async with controller.lock:
            records, responses = plan_alter_reassignments(
                controller.image, topics, self._unclean, allow_change
            )
            await controller.commit(records)
        fields = {
            "error_code": ErrorCode.none,
            "allow_replication_factor_change": allow_change,
            "responses": responses,
        }
        return make_response(ALTER_PARTITION_REASSIGNMENTS, version, fields)

    async def list_partition_reassignments(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._allowed(context, AclOperation.DESCRIBE):
            fields = {"error_code": ErrorCode.cluster_authorization_failed, "topics": []}
            return make_response(LIST_PARTITION_REASSIGNMENTS, version, fields)
        topics = (
            None
            if request.topics is None
            else [(t.name, tuple(t.partition_indexes)) for t in request.topics]
        )
        listed = list_reassignments(self._controller.image, topics)
        fields = {"error_code": ErrorCode.none, "topics": listed}
        return make_response(LIST_PARTITION_REASSIGNMENTS, version, fields)

    async def fence_stale_brokers(self, now_ms: int) -> list[int]:
        """Fence every unfenced broker whose session has lapsed by `now_ms`, one commit each
        (Kafka's maybeFenceOneStaleBroker); the ids fenced."""
        controller = self._controller
        fenced = []
        for broker_id in self.heartbeats.stale_brokers(controller.image, now_ms):
            async with controller.lock:
                broker = controller.image.brokers.get(broker_id)
                if broker is None or broker.fenced:
                    continue
                if self.heartbeats.has_valid_session(broker, now_ms):
                    continue  # it heartbeat meanwhile
                log.info("fencing broker %s: no heartbeat within its session", broker_id)
                await controller.commit(plan_fence(controller.image, broker_id, self._unclean))
                self.heartbeats.fenced(broker_id)
                fenced.append(broker_id)
        return fenced

    async def balance_partition_leaders(self) -> int:
        """Move leadership back to preferred replicas that can lead; how many moved."""
        controller = self._controller
        async with controller.lock:
            records = plan_balance_leaders(controller.image, MAX_ELECTIONS_PER_IMBALANCE)
            await controller.commit(records)
        return len(records)

    async def balance_leaders_periodically(self, interval_s: float) -> None:
        """Every `interval_s`, or at once while a round hit its limit, balance leaders."""
        moved = 0
        while True:
            if moved < MAX_ELECTIONS_PER_IMBALANCE:
                await self._sleep(interval_s)
            try:
                moved = await self.balance_partition_leaders()
            except Exception as error:  # the next round tries again
                log.error("balancing partition leaders failed: %s", error)
                moved = 0

    def activate(self) -> None:
        """This node became the active controller: every broker gets a full session from
        now to reach it (as in Kafka), then fencing and leader balancing start."""
        self.heartbeats.sessions.clear()
        self.start()

    def start(self) -> None:
        """Start the periodic fencing and leader balancing on the running loop (the active
        controller's duties)."""
        loop = asyncio.get_running_loop()
        if self._fencing is None:
            self._fencing = loop.create_task(self._fence_periodically())
        if self.leader_balancing is None and self.leader_balance_interval_s is not None:
            self.leader_balancing = loop.create_task(
                self.balance_leaders_periodically(self.leader_balance_interval_s)
            )

    async def _fence_periodically(self) -> None:
        while True:
            now = self.heartbeats.clock()
            wait = self.heartbeats.next_expiry_ms(self._controller.image) - now
            await asyncio.sleep(max(wait, MIN_CHECK_INTERVAL_MS) / 1000)
            try:
                await self.fence_stale_brokers(self.heartbeats.clock())
            except Exception as error:  # the next round tries again
                log.error("fencing stale brokers failed: %s", error)

    async def close(self) -> None:
        for task in (self._fencing, self.leader_balancing):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._fencing = self.leader_balancing = None


def install(controller: Controller, dispatcher: Dispatcher) -> ClusterControl:
    """Route the cluster APIs (versions Kafka 4 serves). Registration, heartbeats and
    AlterPartition come from brokers only, on the controller listeners."""
    cluster = ClusterControl(controller)
    register, forwarded = dispatcher.register, Exposure.FORWARDED
    register(ELECT_LEADERS, 0, 2, cluster.elect_leaders, exposure=forwarded)
    register(
        ALTER_PARTITION_REASSIGNMENTS,
        0,
        1,
        cluster.alter_partition_reassignments,
        exposure=forwarded,
    )
    register(
        LIST_PARTITION_REASSIGNMENTS, 0, 0, cluster.list_partition_reassignments, exposure=forwarded
    )
    register(ALTER_PARTITION, 2, 3, cluster.alter_partition, exposure=Exposure.CONTROLLER)
    register(BROKER_REGISTRATION, 0, 4, cluster.register_broker, exposure=Exposure.CONTROLLER)
    register(BROKER_HEARTBEAT, 0, 1, cluster.broker_heartbeat, exposure=Exposure.CONTROLLER)
    return cluster
