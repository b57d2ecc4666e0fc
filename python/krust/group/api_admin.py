"""DescribeGroups, ListGroups and DeleteGroups: kio entities in and out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from krust.bridge.protocol import make_response
from krust.group.api_membership import Route
from krust.group.classic.group import GroupState
from krust.group.coordinator import GroupCoordinator
from krust.group.results import DescribedGroup, ErrorCode
from krust.plugins.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import RequestContext

DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
# Kafka's "authorized operations were not requested" marker (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# KIP-1043: from v6 a group that does not exist is an error, with a message.
FIRST_VERSION_WITH_GROUP_NOT_FOUND = 6


class AdminApis:
    def __init__(
        self, coordinator: GroupCoordinator, authorization: Authorization | None = None
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    async def _groups_allowed(
        self, context: RequestContext, operation: AclOperation, group_ids: Sequence[str]
    ) -> set[str]:
        return await self._authorization.allowed_names(
            context, operation, ResourceType.GROUP, group_ids
        )

    def routes(self) -> Sequence[Route]:
        return [
            (DESCRIBE_GROUPS, 0, 6, self.describe_groups),
            (LIST_GROUPS, 0, 5, self.list_groups),
            (DELETE_GROUPS, 0, 2, self.delete_groups),
        ]

    async def describe_groups(self, request: Any, context: RequestContext) -> Any:
        groups: list[dict[str, Any]] = []
        describable = await self._groups_allowed(context, AclOperation.DESCRIBE, request.groups)
        # KIP-430 (v3+): the operations on each group, when asked for.
        wants_operations = getattr(request, "include_authorized_operations", False)
        for group_id in request.groups:
            if group_id not in describable:
                groups.append(
                    {"group_id": group_id, "error_code": ErrorCode.group_authorization_failed}
                )
                continue
            described = self._coordinator.describe_group(group_id)
            operations = (
                await self._authorization.authorized_operations(
                    context, ResourceType.GROUP, group_id
                )
                if wants_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            groups.append(
                {
                    **_error(described, context.api_version),
                    "authorized_operations": operations,
                    "group_id": described.group_id,
                    "group_state": described.state,
                    "protocol_type": described.protocol_type,
                    "protocol_data": described.protocol_data,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.metadata,
                            "member_assignment": m.assignment,
                        }
                        for m in described.members
                    ],
                }
            )
        return make_response(DESCRIBE_GROUPS, context.api_version, {"groups": groups})

    async def list_groups(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        error, groups = self._coordinator.list_groups(
            list(request.states_filter) if version >= 4 else [],
            list(request.types_filter) if version >= 5 else [],
        )
        # As Kafka: DESCRIBE on the cluster lists every group, otherwise those the principal
        # may DESCRIBE.
        if not await self._authorization.allowed(
            context, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            ids = [g.group_id for g in groups]
            describable = await self._groups_allowed(context, AclOperation.DESCRIBE, ids)
            groups = [g for g in groups if g.group_id in describable]
        return make_response(
            LIST_GROUPS,
            version,
            {
                "error_code": error,
                "groups": [
                    {
                        "group_id": g.group_id,
                        "protocol_type": g.protocol_type,
                        "group_state": g.state,
                        "group_type": g.group_type,
                    }
                    for g in groups
                ],
            },
        )

    async def delete_groups(self, request: Any, context: RequestContext) -> Any:
        names = list(request.groups_names)
        deletable = await self._groups_allowed(context, AclOperation.DELETE, names)
        results = await self._coordinator.delete_groups([g for g in names if g in deletable])
        results = list(results) + [
            (g, ErrorCode.group_authorization_failed) for g in names if g not in deletable
        ]
        return make_response(
            DELETE_GROUPS,
            context.api_version,
            {"results": [{"group_id": g, "error_code": e} for g, e in results]},
        )


def _error(described: DescribedGroup, version: int) -> dict[str, Any]:
    if (
        version >= FIRST_VERSION_WITH_GROUP_NOT_FOUND
        and described.error is ErrorCode.none
        and described.state == GroupState.DEAD.value
    ):
        problem = "not found" if described.is_classic else "is not a classic group"
        return {
            "error_code": ErrorCode.group_id_not_found,
            "error_message": f"Group {described.group_id} {problem}.",
        }
    return {"error_code": described.error, "error_message": None}
