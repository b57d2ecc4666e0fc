"""BrokerContext: what every service gets when it installs itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from krust.runtime.core import ServicesCore
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.controller.controller import Controller
    from krust.group.api_membership import TransactionCoordinatorLocator
    from krust.runtime.bridge import Dispatcher


def _no_authorizer() -> Authorization:
    return Authorization(None)


@dataclass
class BrokerContext:
    config: Mapping[str, Any]  # validated values by Kafka name, e.g. config["node.id"]
    core: ServicesCore
    controller: Controller
    dispatcher: Dispatcher
    authorization: Authorization = field(default_factory=_no_authorizer)
    # Set by krust.transaction's install (before the group coordinator's, which serves
    # FindCoordinator for both key types).
    transactions: TransactionCoordinatorLocator | None = None
