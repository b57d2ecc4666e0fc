"""The group and transaction coordinators: advertised from a static table before the port
opens, imported and installed after it (docs/python-services.md, "Start-up order").

Their modules are most of the broker's Python import time; an empty broker answers
ApiVersions and Metadata without them. Their requests that arrive before they are installed
wait for it on the services' loop (`Dispatcher.reserve`), then are answered as usual.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from krust.bridge import Exposure

if TYPE_CHECKING:
    from krust.context import BrokerContext

# How long to wait before reading the modules again after the process could not open them.
IMPORT_RETRY_S = 1.0
log = logging.getLogger(__name__)

_CLIENTS, _INTERNAL = Exposure.CLIENTS, Exposure.INTERNAL

# (api key, min version, max version, exposure) of every api the coordinators register; the
# dispatcher refuses a registration that differs, so this table cannot drift from the handlers.
ADVERTISED: tuple[tuple[int, int, int, Exposure], ...] = (
    (8, 2, 10, _CLIENTS),  # OffsetCommit
    (9, 1, 10, _CLIENTS),  # OffsetFetch
    (10, 0, 6, _CLIENTS),  # FindCoordinator
    (11, 0, 9, _CLIENTS),  # JoinGroup
    (12, 0, 4, _CLIENTS),  # Heartbeat
    (13, 0, 5, _CLIENTS),  # LeaveGroup
    (14, 0, 5, _CLIENTS),  # SyncGroup
    (15, 0, 6, _CLIENTS),  # DescribeGroups
    (16, 0, 5, _CLIENTS),  # ListGroups
    (22, 0, 5, _INTERNAL),  # InitProducerId: the core passes transactional ones on
    (24, 0, 5, _CLIENTS),  # AddPartitionsToTxn
    (25, 0, 4, _CLIENTS),  # AddOffsetsToTxn
    (26, 0, 5, _CLIENTS),  # EndTxn
    (27, 1, 1, _CLIENTS),  # WriteTxnMarkers
    (28, 0, 4, _CLIENTS),  # TxnOffsetCommit
    (42, 0, 2, _CLIENTS),  # DeleteGroups
    (47, 0, 0, _CLIENTS),  # OffsetDelete
    (65, 0, 0, _CLIENTS),  # DescribeTransactions
    (66, 0, 2, _CLIENTS),  # ListTransactions
    (68, 0, 1, _CLIENTS),  # ConsumerGroupHeartbeat
    (69, 0, 1, _CLIENTS),  # ConsumerGroupDescribe
)


def reserve(ctx: BrokerContext) -> None:
    """Advertise the coordinators' apis on the dispatcher, before the port opens."""
    for api_key, min_version, max_version, exposure in ADVERTISED:
        ctx.dispatcher.reserve(api_key, min_version, max_version, exposure=exposure)


def install(ctx: BrokerContext, installed: list[object], stopping: threading.Event) -> None:
    """Import and install the transaction coordinator, then the group coordinator (which
    answers FindCoordinator for transactional ids through it), appending each to `installed`
    as it is; both start loading their internal topic on the services' loop. Returns without
    installing if `stopping` is set while the modules cannot be read."""
    installers = _import_installers(stopping)
    if not installers:
        return
    for install_one in installers:
        installed.append(install_one(ctx))
    waiting = ctx.dispatcher.reserved()
    if waiting:
        raise RuntimeError(f"advertised apis without a handler: {sorted(waiting)}")


def _import_installers(stopping: threading.Event) -> list[Callable[[BrokerContext], object]]:
    """The coordinators' installers, imported now. A process out of file descriptors (or
    memory) cannot read the modules: that is the broker's resources, not its code, so it goes
    on serving as it would with the modules loaded (a log dir that hits the limit goes
    offline, as in Kafka) and reads them again a little later; the coordinators' requests wait."""
    while True:
        try:
            from krust.group.install import install as install_group
            from krust.transaction.install import install as install_transaction
        except OSError as error:
            log.error("cannot read the coordinators' modules, trying again: %s", error)
            importlib.invalidate_caches()
            if stopping.wait(IMPORT_RETRY_S):
                return []
        else:
            return [install_transaction, install_group]
