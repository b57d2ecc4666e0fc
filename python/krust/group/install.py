"""Plugging the group coordinator into the broker: routes on the dispatcher, start on its loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from krust.coordinator.clock import AsyncioClock
from krust.group.api_admin import AdminApis
from krust.group.api_consumer_group import ConsumerGroupApis
from krust.group.api_membership import MembershipApis
from krust.group.api_offsets import OffsetApis
from krust.group.api_txn_markers import TxnMarkerApis
from krust.group.api_txn_offsets import TxnOffsetApis
from krust.group.coordinator import GroupCoordinator
from krust.group.settings import GroupCoordinatorConfig

if TYPE_CHECKING:
    from krust.bridge.context import BrokerContext


def install(ctx: BrokerContext) -> GroupCoordinator:
    """Register the group APIs and start loading `__consumer_offsets` on the services' loop."""
    loop = ctx.dispatcher.loop
    coordinator = GroupCoordinator(
        GroupCoordinatorConfig.from_config(ctx.config),
        ctx.core,
        ctx.controller,
        AsyncioClock(loop),
        loop,
    )
    authorization = ctx.authorization
    for apis in (
        MembershipApis(coordinator, authorization, ctx.transactions),
        OffsetApis(coordinator, authorization),
        AdminApis(coordinator, authorization),
        ConsumerGroupApis(coordinator, authorization),
        TxnOffsetApis(coordinator, authorization),
        TxnMarkerApis(ctx.core, coordinator, authorization),
    ):
        for api_key, min_version, max_version, handler in apis.routes():
            ctx.dispatcher.register(api_key, min_version, max_version, handler)
    # The loop runs on the dispatcher's thread; timers must be created there.
    loop.call_soon_threadsafe(coordinator.start)
    return coordinator
