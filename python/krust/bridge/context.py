"""BrokerContext: what every service gets when it installs itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from krust.bridge.core import ServicesCore

if TYPE_CHECKING:
    from krust.bridge.dispatcher import Dispatcher
    from krust.controller.controller import Controller
    from krust.group.api_membership import TransactionCoordinatorLocator
    from krust.security.authorization import Authorization


@dataclass
class BrokerContext:
    config: Mapping[str, Any]  # validated values by Kafka name, e.g. config["node.id"]
    core: ServicesCore
    controller: Controller
    dispatcher: Dispatcher
    authorization: Authorization
    # Set by krust.transaction's install (before the group coordinator's, which serves
    # FindCoordinator for both key types).
    transactions: TransactionCoordinatorLocator | None = None
