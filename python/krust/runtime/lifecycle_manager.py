"""The broker side of KRaft's broker lifecycle (Kafka's BrokerLifecycleManager): register
with the active controller, heartbeat every `broker.heartbeat.interval.ms` with the metadata
offset this node has applied, and before stopping ask for a controlled shutdown, so that the
controller moves leadership away first.

Only a node in a controller quorum of several voters runs it: a quorum of one registers its
broker with its own controller in-process (krust.controller)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from krust.bridge.context import BrokerContext
from krust.bridge.controller_requests import ControllerSender, request_controller
from krust.config.roles import is_broker
from krust.controller.bootstrap import SECURITY_PROTOCOL_IDS
from krust.controller.features import SUPPORTED_FEATURES
from krust.controller.meta_properties import random_kafka_uuid

log = logging.getLogger(__name__)

BROKER_REGISTRATION, REGISTRATION_VERSION = 62, 4
BROKER_HEARTBEAT, HEARTBEAT_VERSION = 63, 1
# How long to wait before trying again after a failed registration or heartbeat.
RETRY_BACKOFF_S = 0.5
# A controlled shutdown gives up after this, as Kafka's does after its request timeouts.
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0


class BrokerLifecycleManager:
    """Registers this broker and keeps its session alive."""

    def __init__(
        self,
        config: Mapping[str, Any],
        cluster_id: str,
        core: ControllerSender,
        metadata_offset: Callable[[], int],
    ) -> None:
        self._config = config
        self._cluster_id = cluster_id
        self._core = core
        self._metadata_offset = metadata_offset
        self._incarnation_id = random_kafka_uuid()
        self._interval_s: float = config["broker.heartbeat.interval.ms"] / 1000
        self.broker_epoch = -1
        self.fenced = True
        self._task: asyncio.Task[None] | None = None
        self._shut_down_done = False
        self._refused_with: ErrorCode | None = None

    def start(self) -> None:
        """Register, then heartbeat, on the running event loop until `close`."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def prepare_shutdown(self) -> None:
        """A controlled shutdown, while the broker still serves: heartbeat with want_shut_down
        until the controller says this broker leads nothing any more and every broker knows
        (or the timeout). Heartbeats stop then."""
        if self._task is None or self._shut_down_done:
            return
        self._shut_down_done = True
        self._task.cancel()
        log.info("controlled shutdown: moving this broker's leaderships away")
        try:
            await asyncio.wait_for(self._shut_down(), CONTROLLED_SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            log.warning("controlled shutdown: no answer from the controller in time")

    async def close(self) -> None:
        """The controlled shutdown if `prepare_shutdown` did not run it, then stop."""
        await self.prepare_shutdown()

    async def _run(self) -> None:
        while self.broker_epoch < 0:
            await self._register()
            if self.broker_epoch < 0:
                await asyncio.sleep(RETRY_BACKOFF_S)
        while True:
            reply = await self._heartbeat(want_shut_down=False)
            if reply is not None and reply.error_code is ErrorCode.stale_broker_epoch:
                # The controller lost this registration (e.g. fenced and unregistered).
                self.broker_epoch = -1
                while self.broker_epoch < 0:
                    await self._register()
                    if self.broker_epoch < 0:
                        await asyncio.sleep(RETRY_BACKOFF_S)
            await asyncio.sleep(self._interval_s)

    async def _shut_down(self) -> None:
        if self.broker_epoch < 0:
            return
        while True:
            reply = await self._heartbeat(want_shut_down=True)
            if reply is not None and (
                reply.should_shut_down or reply.error_code is not ErrorCode.none
            ):
                return
            await asyncio.sleep(min(self._interval_s, RETRY_BACKOFF_S))

    async def _register(self) -> None:
        config = self._config
        protocols = config["listener.security.protocol.map"]
        fields = {
            "broker_id": config["node.id"],
            "cluster_id": self._cluster_id,
            "incarnation_id": self._incarnation_id,
            "listeners": [
                {
                    "name": listener.name,
                    "host": listener.host,
                    "port": listener.port,
                    "security_protocol": SECURITY_PROTOCOL_IDS[protocols[listener.name]],
                }
                for listener in config["advertised.listeners"]
            ],
            "features": [
                {
                    "name": name,
                    "min_supported_version": supported.min,
                    "max_supported_version": supported.max,
                }
                for name, supported in SUPPORTED_FEATURES.items()
            ],
            "rack": config["broker.rack"],
        }
        reply = await self._send(BROKER_REGISTRATION, REGISTRATION_VERSION, fields)
        if reply is None:
            return
        if reply.error_code is ErrorCode.not_controller:
            return  # the controller is changing or not ready yet: try again
        if reply.error_code is not ErrorCode.none:
            self._report_refusal(reply.error_code)
            return
        self.broker_epoch = int(reply.broker_epoch)
        self._core.set_broker_epoch(self.broker_epoch)
        log.info("registered with the controller, broker epoch %d", self.broker_epoch)

    def _report_refusal(self, error: ErrorCode) -> None:
        """Logs a refused registration once per error: it is retried every RETRY_BACKOFF_S,
        which lets this broker in once a duplicate's session lapses, as Kafka's does."""
        if error is self._refused_with:
            return
        self._refused_with = error
        if error is ErrorCode.duplicate_broker_registration:
            log.error(
                "broker registration refused: DUPLICATE_BROKER_REGISTRATION: another live broker "
                "is registered with node.id %d; every broker needs its own node.id",
                self._config["node.id"],
            )
        else:
            log.warning("broker registration refused: %s", error.name)

    async def _heartbeat(self, want_shut_down: bool) -> Any:
        fields = {
            "broker_id": self._config["node.id"],
            "broker_epoch": self.broker_epoch,
            "current_metadata_offset": self._metadata_offset(),
            "want_fence": False,
            "want_shut_down": want_shut_down,
        }
        reply = await self._send(BROKER_HEARTBEAT, HEARTBEAT_VERSION, fields)
        if reply is not None and reply.error_code is ErrorCode.none:
            if self.fenced and not reply.is_fenced:
                log.info("the controller unfenced this broker")
            self.fenced = bool(reply.is_fenced)
        return reply

    async def _send(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        """The decoded response, or None when the controller could not be reached."""
        try:
            return await request_controller(self._core, api_key, version, fields)
        except Exception as error:  # the channel retried until its timeout
            log.warning("api %d to the controller failed: %s", api_key, error)
            return None


def install(ctx: BrokerContext) -> BrokerLifecycleManager | None:
    """Start the lifecycle of a broker in a quorum of several voters; nothing for a quorum of
    one or a controller-only node."""
    if not ctx.config["controller.quorum.voters"] or not is_broker(ctx.config):
        return None
    publisher = ctx.controller.publisher
    manager = BrokerLifecycleManager(
        ctx.config,
        publisher.image.cluster_id,
        ctx.core,
        lambda: publisher.image.metadata_offset,
    )
    ctx.dispatcher.loop.call_soon_threadsafe(manager.start)
    return manager
