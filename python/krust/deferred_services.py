"""The services installed after the port opens: the controller's apis and the group and
transaction coordinators. Their apis are advertised from a static table before the port opens
(docs/python-services.md, "Start-up order").

Their modules are most of the broker's Python import time, and an empty broker answers
ApiVersions and Metadata without them (the core answers those from the image that
`Controller.open` pushed). A request for one of their apis that arrives before it is installed
waits for it on the services' loop (`Dispatcher.reserve`), then is answered as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from krust.bridge import Exposure

if TYPE_CHECKING:
    from krust.context import BrokerContext

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
)


def reserve(ctx: BrokerContext) -> None:
    """Advertise these services' apis on the dispatcher, before the port opens."""
    for api_key, min_version, max_version, exposure in ADVERTISED:
        ctx.dispatcher.reserve(api_key, min_version, max_version, exposure=exposure)


def install(ctx: BrokerContext, installed: list[object]) -> None:
    """Import and install the controller's apis, the transaction coordinator, then the group
    coordinator (which answers FindCoordinator for transactional ids through it), appending
    each to `installed` as it is; the coordinators start loading their internal topic on the
    services' loop."""
    from krust.controller import install as install_controller
    from krust.group.install import install as install_group
    from krust.transaction.install import install as install_transaction

    installed.append(install_controller(ctx))
    installed.append(install_transaction(ctx))
    installed.append(install_group(ctx))
    waiting = ctx.dispatcher.reserved()
    if waiting:
        raise RuntimeError(f"advertised apis without a handler: {sorted(waiting)}")
