"""AlterClientQuotas and DescribeClientQuotas (KIP-546), as Kafka 4 answers them: each altered
entity's quotas become ClientQuotaRecords in the metadata log, durable before the answer, and
the core enforces the new quotas from then on. See docs/quotas.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.controller.client_quotas import (
    ClientQuotaError,
    FilterComponent,
    QuotaAlteration,
    describe_client_quotas,
    plan_alter_client_quotas,
)
from krust.controller.configs import Register

if TYPE_CHECKING:
    from krust.controller.controller import Controller

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49


class ClientQuotaApis:
    """Serves the two client quota APIs from the controller's image."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    async def alter_client_quotas(self, request: Any, context: RequestContext) -> Any:
        alterations = [
            QuotaAlteration(
                pairs=[(e.entity_type, e.entity_name) for e in entry.entity],
                ops=[(op.key, None if op.remove else float(op.value)) for op in entry.ops],
            )
            for entry in request.entries
        ]
        controller = self._controller
        async with controller.lock:
            plan = plan_alter_client_quotas(controller.image.client_quotas, alterations)
            if plan.records and not request.validate_only:
                await controller.commit(plan.records)
        entries = [
            {
                "error_code": ErrorCode.none if error is None else error.error,
                "error_message": None if error is None else error.message,
                "entity": [{"entity_type": t, "entity_name": n} for t, n in pairs],
            }
            for error, pairs in plan.results
        ]
        return make_response(ALTER_CLIENT_QUOTAS, context.api_version, {"entries": entries})

    async def describe_client_quotas(self, request: Any, context: RequestContext) -> Any:
        components = [
            FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components
        ]
        fields: dict[str, Any]
        try:
            matched = describe_client_quotas(
                self._controller.image.client_quotas, components, request.strict
            )
        except ClientQuotaError as error:
            fields = {"error_code": error.error, "error_message": error.message, "entries": None}
        else:
            entries = [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
                }
                for entity, values in matched
            ]
            fields = {"error_code": ErrorCode.none, "error_message": None, "entries": entries}
        return make_response(DESCRIBE_CLIENT_QUOTAS, context.api_version, fields)


def install(controller: Controller, register: Register) -> ClientQuotaApis:
    """Route the client quota APIs (versions 0-1, as Kafka 4 serves them)."""
    apis = ClientQuotaApis(controller)
    register(DESCRIBE_CLIENT_QUOTAS, 0, 1, apis.describe_client_quotas)
    register(ALTER_CLIENT_QUOTAS, 0, 1, apis.alter_client_quotas, exposure=Exposure.FORWARDED)
    return apis
