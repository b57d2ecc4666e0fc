"""The services installed after the port opens: the group and transaction coordinators, and on
a node that is a quorum of one the controller's apis too. Their apis are advertised from a
static table before the port opens (docs/python-services.md, "Start-up order").

Their modules are most of the broker's Python import time, and an empty broker answers
ApiVersions and Metadata without them: the core answers those from the image that
`Controller.open` pushed. A request for one of their apis that arrives before it is installed
waits for it on the services' loop (`Dispatcher.reserve`), then is answered as usual.

A node in a quorum of several voters installs the controller's apis and its lifecycle manager
before the port opens instead: it registers with the active controller (which may be itself)
before it serves clients, as Kafka's brokers do.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from krust.bridge.routes import CoreRoutes, Exposure
from krust.config import configured_plugins

if TYPE_CHECKING:
    from types import ModuleType

    from krust.bridge.context import BrokerContext

Installer = Callable[["BrokerContext"], object]

# How long to wait before reading the modules again after the process could not open them.
IMPORT_RETRY_S = 1.0
log = logging.getLogger(__name__)

_CLIENTS, _INTERNAL = Exposure.CLIENTS, Exposure.INTERNAL
_CONTROLLER, _FORWARDED = Exposure.CONTROLLER, Exposure.FORWARDED

# (api key, min version, max version, exposure) of every api these services register; the
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
    (19, 2, 7, _FORWARDED),  # CreateTopics
    (20, 1, 6, _FORWARDED),  # DeleteTopics
    (22, 0, 5, _INTERNAL),  # InitProducerId: the core passes transactional ones on
    (24, 0, 5, _CLIENTS),  # AddPartitionsToTxn
    (25, 0, 4, _CLIENTS),  # AddOffsetsToTxn
    (26, 0, 5, _CLIENTS),  # EndTxn
    (27, 1, 1, _CLIENTS),  # WriteTxnMarkers
    (28, 0, 4, _CLIENTS),  # TxnOffsetCommit
    (29, 1, 3, _CLIENTS),  # DescribeAcls
    (30, 2, 3, _FORWARDED),  # CreateAcls
    (31, 1, 3, _FORWARDED),  # DeleteAcls
    (32, 1, 4, _CLIENTS),  # DescribeConfigs
    (33, 0, 2, _FORWARDED),  # AlterConfigs
    (37, 0, 3, _FORWARDED),  # CreatePartitions
    (42, 0, 2, _CLIENTS),  # DeleteGroups
    (43, 0, 2, _FORWARDED),  # ElectLeaders
    (44, 0, 1, _FORWARDED),  # IncrementalAlterConfigs
    (45, 0, 1, _FORWARDED),  # AlterPartitionReassignments
    (46, 0, 0, _FORWARDED),  # ListPartitionReassignments
    (47, 0, 0, _CLIENTS),  # OffsetDelete
    (48, 0, 1, _CLIENTS),  # DescribeClientQuotas
    (49, 0, 1, _FORWARDED),  # AlterClientQuotas
    (50, 0, 0, _CLIENTS),  # DescribeUserScramCredentials
    (51, 0, 0, _FORWARDED),  # AlterUserScramCredentials
    (56, 2, 3, _CONTROLLER),  # AlterPartition
    (57, 0, 2, _FORWARDED),  # UpdateFeatures
    (62, 0, 4, _CONTROLLER),  # BrokerRegistration
    (63, 0, 1, _CONTROLLER),  # BrokerHeartbeat
    (65, 0, 0, _CLIENTS),  # DescribeTransactions
    (66, 0, 2, _CLIENTS),  # ListTransactions
    (67, 0, 0, _CONTROLLER),  # AllocateProducerIds
    (68, 0, 1, _CLIENTS),  # ConsumerGroupHeartbeat
    (69, 0, 1, _CLIENTS),  # ConsumerGroupDescribe
    (74, 0, 1, _CLIENTS),  # ListConfigResources
)
# KIP-714's apis, advertised only where pushed metrics go somewhere (a metric.reporters plugin
# or the metrics endpoint), as Kafka advertises them only with a ClientTelemetry reporter.
TELEMETRY_APIS: tuple[tuple[int, int, int, Exposure], ...] = (
    (71, 0, 0, _CLIENTS),  # GetTelemetrySubscriptions
    (72, 0, 0, _CLIENTS),  # PushTelemetry
)

# The controller's apis, then the lifecycle manager (a broker's registration and heartbeats in
# a quorum of several voters; nothing in a quorum of one).
CONTROLLER_SERVICES = ("krust.controller.apis", "krust.runtime.lifecycle_manager")
# The transaction coordinator first: the group coordinator's FindCoordinator locates
# transactional ids through it (`BrokerContext.transactions`).
COORDINATORS = ("krust.transaction.install", "krust.group.install")


def advertised(config: Mapping[str, Any]) -> tuple[tuple[int, int, int, Exposure], ...]:
    """`ADVERTISED`, and the telemetry apis if this broker's config receives client metrics."""
    telemetry = TELEMETRY_APIS if configured_plugins.client_telemetry_enabled(config) else ()
    return ADVERTISED + telemetry


def reserve(ctx: BrokerContext) -> None:
    """Advertise these services' apis on the dispatcher, before the port opens."""
    for api_key, min_version, max_version, exposure in advertised(ctx.config):
        ctx.dispatcher.reserve(api_key, min_version, max_version, exposure=exposure)


def core_routes(config: Mapping[str, Any]) -> CoreRoutes:
    """The route table of a node whose services start after the port opens: this table,
    which the dispatcher then reserves."""
    return {key: (low, high, exposure.value) for key, low, high, exposure in advertised(config)}


def after_port(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The modules whose `install` runs after the port opens, in order."""
    if config["controller.quorum.voters"]:
        return COORDINATORS
    return (*CONTROLLER_SERVICES, *COORDINATORS)


def before_port(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The deferred-capable modules a node in a quorum of several voters installs before it
    listens (see the module's docstring)."""
    return CONTROLLER_SERVICES if config["controller.quorum.voters"] else ()


def install(
    ctx: BrokerContext,
    modules: Sequence[str],
    installed: list[object],
    stopping: threading.Event | None = None,
) -> bool:
    """Import `modules` and call each one's `install(ctx)` in order, appending what it
    returns to `installed`. With `stopping` (after the port opened), modules the process
    cannot read are read again until they can be; False, with nothing installed, if
    `stopping` is set meanwhile."""
    imported = import_modules(modules, stopping)
    if imported is None:
        return False
    installers: list[Installer] = [module.install for module in imported]
    for install_one in installers:
        installed.append(install_one(ctx))
    return True


def check_all_installed(ctx: BrokerContext) -> None:
    """Raise if an advertised api still has no handler."""
    waiting = ctx.dispatcher.reserved()
    if waiting:
        raise RuntimeError(f"advertised apis without a handler: {sorted(waiting)}")


def import_modules(
    modules: Sequence[str], stopping: threading.Event | None
) -> list[ModuleType] | None:
    """The modules, imported now. After the port opened (`stopping` given), a process out of
    file descriptors (or memory) that cannot read them goes on serving as it would with them
    loaded (that is the broker's resources, not its code; a log dir that hits the limit goes
    offline, as in Kafka) and reads them again a little later while their requests wait;
    None if `stopping` is set meanwhile."""
    while True:
        try:
            return [importlib.import_module(name) for name in modules]
        except OSError as error:
            if stopping is None:
                raise
            log.error("cannot read the modules of %s, trying again: %s", ", ".join(modules), error)
            importlib.invalidate_caches()
            if stopping.wait(IMPORT_RETRY_S):
                return None
