"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup: kio entities in and out.

Each handler turns the version-specific request into the coordinator's version-free call and the
result back into the response of the request's version (make_response drops fields that
version lacks). Versions start at 0: librdkafka's classic consumer needs v0 of all of these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from krust.bridge.protocol import make_response
from krust.group.classic.group_manager import JoinGroupRequest, LeavingMember, SyncGroupRequest
from krust.group.coordinator import GroupCoordinator
from krust.group.results import CoordinatorLocation, ErrorCode
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import Handler, RequestContext

FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

Route = tuple[int, int, int, "Handler"]


class TransactionCoordinatorLocator(Protocol):
    """The transaction coordinator's FindCoordinator (krust.transaction)."""

    async def find_coordinator(
        self, transactional_id: str, listener: str
    ) -> CoordinatorLocation: ...


def millis(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def kafka_client_host(host: str) -> str:
    """Kafka reports a member's host as Java's InetAddress.toString(): "/127.0.0.1"."""
    return host if host.startswith("/") else f"/{host}"


class MembershipApis:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        authorization: Authorization | None = None,
        transactions: TransactionCoordinatorLocator | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)
        self._transactions = transactions

    async def _may_read_group(self, context: RequestContext, group_id: str) -> bool:
        """Kafka's check of JoinGroup, SyncGroup, Heartbeat and LeaveGroup: READ on the group."""
        return await self._authorization.allowed(
            context, AclOperation.READ, ResourceType.GROUP, group_id
        )

    def _group_denied(self, api_key: int, context: RequestContext) -> Any:
        return make_response(
            api_key, context.api_version, {"error_code": ErrorCode.group_authorization_failed}
        )

    def routes(self) -> Sequence[Route]:
        return [
            (FIND_COORDINATOR, 0, 6, self.find_coordinator),
            (JOIN_GROUP, 0, 9, self.join_group),
            (SYNC_GROUP, 0, 5, self.sync_group),
            (HEARTBEAT, 0, 4, self.heartbeat),
            (LEAVE_GROUP, 0, 5, self.leave_group),
        ]

    async def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
        # KIP-699: v4+ looks up a batch of keys in one request.
        keys = list(request.coordinator_keys) if version >= 4 else [request.key]
        locations = await asyncio.gather(*(self._locate(key, key_type, context) for key in keys))
        if version >= 4:
            coordinators = [
                {**_location_fields(location), "key": key}
                for key, location in zip(keys, locations, strict=True)
            ]
            return make_response(FIND_COORDINATOR, version, {"coordinators": coordinators})
        return make_response(FIND_COORDINATOR, version, _location_fields(locations[0]))

    async def _locate(
        self, key: str, key_type: int, context: RequestContext
    ) -> CoordinatorLocation:
        # As Kafka: DESCRIBE on the group or the transactional id the key names.
        if key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            resource_type, refusal = (
                (ResourceType.GROUP, ErrorCode.group_authorization_failed)
                if key_type == GROUP_KEY_TYPE
                else (
                    ResourceType.TRANSACTIONAL_ID,
                    ErrorCode.transactional_id_authorization_failed,
                )
            )
            if not await self._authorization.allowed(
                context, AclOperation.DESCRIBE, resource_type, key
            ):
                return CoordinatorLocation(refusal)
        if key_type == GROUP_KEY_TYPE:
            return await self._coordinator.find_coordinator(key, context.listener_name)
        if key_type == TRANSACTION_KEY_TYPE and self._transactions is not None:
            return await self._transactions.find_coordinator(key, context.listener_name)
        # An unknown key type, or transactions on a broker built without their coordinator:
        # retrying cannot help, so not COORDINATOR_NOT_AVAILABLE.
        return CoordinatorLocation(ErrorCode.invalid_request)

    async def join_group(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._may_read_group(context, request.group_id):
            return self._group_denied(JOIN_GROUP, context)
        session_timeout_ms = millis(request.session_timeout)
        # v0 has no rebalance timeout: Kafka uses the session timeout for both.
        rebalance_timeout_ms = millis(request.rebalance_timeout) if version >= 1 else -1
        result = await self._coordinator.join_group(
            JoinGroupRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id if version >= 5 else None,
                protocol_type=request.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=(
                    rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms
                ),
                client_id=context.client_id or "",
                client_host=kafka_client_host(context.client_host),
                require_known_member_id=version >= 4,  # KIP-394
                supports_skip_assignment=version >= 9,  # KIP-814
            )
        )
        return make_response(
            JOIN_GROUP,
            version,
            {
                "error_code": result.error,
                "generation_id": result.generation_id,
                "protocol_type": result.protocol_type,
                # Nullable only from v7.
                "protocol_name": (
                    result.protocol_name if version >= 7 else result.protocol_name or ""
                ),
                "leader": result.leader_id,
                "skip_assignment": result.skip_assignment,
                "member_id": result.member_id,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata,
                    }
                    for m in result.members
                ],
            },
        )

    async def sync_group(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._may_read_group(context, request.group_id):
            return self._group_denied(SYNC_GROUP, context)
        result = await self._coordinator.sync_group(
            SyncGroupRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id if version >= 3 else None,
                generation_id=request.generation_id,
                protocol_type=request.protocol_type if version >= 5 else None,
                protocol_name=request.protocol_name if version >= 5 else None,
                assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
            )
        )
        return make_response(
            SYNC_GROUP,
            version,
            {
                "error_code": result.error,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment,
            },
        )

    async def heartbeat(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._may_read_group(context, request.group_id):
            return self._group_denied(HEARTBEAT, context)
        error = self._coordinator.heartbeat(
            request.group_id,
            request.member_id,
            request.group_instance_id if version >= 3 else None,
            request.generation_id,
        )
        return make_response(HEARTBEAT, version, {"error_code": error})

    async def leave_group(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._may_read_group(context, request.group_id):
            return self._group_denied(LEAVE_GROUP, context)
        if version >= 3:
            # KIP-345: a batch, possibly by group.instance.id alone (admin removal).
            leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
        else:
            leaving = [LeavingMember(request.member_id, None)]
        error, results = await self._coordinator.leave(request.group_id, leaving)
        if version < 3 and error is ErrorCode.none and results:
            error = results[0].error
        return make_response(
            LEAVE_GROUP,
            version,
            {
                "error_code": error,
                "members": [
                    {
                        "member_id": r.member_id,
                        "group_instance_id": r.group_instance_id,
                        "error_code": r.error,
                    }
                    for r in results
                ],
            },
        )


def _location_fields(location: CoordinatorLocation) -> dict[str, Any]:
    return {
        "error_code": location.error,
        "node_id": location.node_id,
        "host": location.host,
        "port": location.port,
    }
