"""Plugging the transaction coordinator into the broker: routes on the dispatcher, start on its
loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from krust.bridge.routes import Exposure
from krust.coordinator.clock import AsyncioClock
from krust.transaction.api import INIT_PRODUCER_ID, TransactionApis
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.settings import TransactionCoordinatorConfig

if TYPE_CHECKING:
    from krust.bridge.context import BrokerContext


def install(ctx: BrokerContext) -> TransactionCoordinator:
    """Register the transaction APIs and start loading `__transaction_state`; the group
    coordinator, installed next, answers FindCoordinator for transactional ids through it."""
    loop = ctx.dispatcher.loop
    coordinator = TransactionCoordinator(
        TransactionCoordinatorConfig.from_config(ctx.config),
        ctx.core,
        ctx.controller,
        AsyncioClock(loop),
        loop,
    )
    for api_key, min_version, max_version, handler in TransactionApis(
        coordinator, ctx.authorization
    ).routes():
        # The core serves InitProducerId and passes the transactional ones on (internal).
        exposure = Exposure.INTERNAL if api_key == INIT_PRODUCER_ID else Exposure.CLIENTS
        ctx.dispatcher.register(api_key, min_version, max_version, handler, exposure=exposure)
    ctx.transactions = coordinator
    # The loop runs on the dispatcher's thread; timers must be created there.
    loop.call_soon_threadsafe(coordinator.start)
    return coordinator
