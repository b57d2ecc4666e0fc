"""ListConfigResources (key 74; KIP-1000's ListClientMetricsResources, which KIP-1142 made
ListConfigResources in Kafka 4.1): the config resources a broker knows, as Kafka's
`KafkaApis.handleListConfigResources` lists them. `kafka-client-metrics --list` uses v1 with
the CLIENT_METRICS type; `Admin.listConfigResources()` asks for every type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.controller.configs import Register, ResourceType
from krust.plugins.authorizer import CLUSTER_NAME, AclOperation
from krust.plugins.authorizer import ResourceType as AclResource

if TYPE_CHECKING:
    from krust.controller.controller import Controller

LIST_CONFIG_RESOURCES = 74
# v1's types, in the order Kafka lists them; v0 lists client metrics subscriptions only.
_V1_TYPES = (
    ResourceType.TOPIC,
    ResourceType.BROKER_LOGGER,
    ResourceType.BROKER,
    ResourceType.CLIENT_METRICS,
    ResourceType.GROUP,
)


class ConfigResourceLister:
    """Answers ListConfigResources from the controller's image."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    async def list_config_resources(self, request: Any, context: RequestContext) -> Any:
        def answer(error: ErrorCode, resources: list[dict[str, Any]]) -> Any:
            return make_response(
                LIST_CONFIG_RESOURCES,
                context.api_version,
                {"error_code": error, "config_resources": resources},
            )

        controller = self._controller
        allowed = await controller.authorization.allowed(
            context, AclOperation.DESCRIBE_CONFIGS, AclResource.CLUSTER, CLUSTER_NAME
        )
        if not allowed:
            return answer(ErrorCode.cluster_authorization_failed, [])
        supported = _V1_TYPES if context.api_version >= 1 else (ResourceType.CLIENT_METRICS,)
        asked = set(getattr(request, "resource_types", ()) or supported)
        if not asked <= {int(t) for t in supported}:
            return answer(ErrorCode.unsupported_version, [])
        image = controller.image
        names = {
            ResourceType.TOPIC: sorted(image.topics),
            ResourceType.BROKER_LOGGER: [str(image.node_id)],
            ResourceType.BROKER: [str(node) for node in sorted(image.brokers)],
            ResourceType.CLIENT_METRICS: sorted(image.client_metrics),
            ResourceType.GROUP: sorted(image.group_configs),
        }
        resources = [
            {"resource_name": name, "resource_type": int(kind)}
            for kind in supported
            if kind in asked
            for name in names[kind]
        ]
        return answer(ErrorCode.none, resources)


def install(controller: Controller, register: Register) -> ConfigResourceLister:
    """Route ListConfigResources (v0-v1, as Kafka 4.3 serves it) to a lister."""
    lister = ConfigResourceLister(controller)
    register(LIST_CONFIG_RESOURCES, 0, 1, lister.list_config_resources)
    return lister
