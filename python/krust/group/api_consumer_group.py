"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): kio entities in and out."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from krust.bridge.protocol import make_response
from krust.group.api_membership import Route, kafka_client_host
from krust.group.consumer.group import ConsumerGroup
from krust.group.consumer.group_spec import Assignment
from krust.group.consumer.heartbeat_request import HeartbeatRequest
from krust.group.consumer.member import ConsumerGroupMember
from krust.group.consumer.target_assignment import preferred_assignor
from krust.group.coordinator import GroupCoordinator
from krust.group.results import ErrorCode
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import RequestContext

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
# Kafka's "authorized operations were not requested" marker (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# ConsumerGroupDescribe v1's member type: the member speaks the classic or the consumer protocol.
CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1


class ConsumerGroupApis:
    def __init__(
        self, coordinator: GroupCoordinator, authorization: Authorization | None = None
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    def routes(self) -> Sequence[Route]:
        return [
            (CONSUMER_GROUP_HEARTBEAT, 0, 1, self.heartbeat),
            (CONSUMER_GROUP_DESCRIBE, 0, 1, self.describe),
        ]

    async def heartbeat(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._authorization.allowed(
            context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            return make_response(
                CONSUMER_GROUP_HEARTBEAT,
                version,
                {"error_code": ErrorCode.group_authorization_failed, "member_epoch": 0},
            )
        names = request.subscribed_topic_names
        if names and len(
            await self._authorization.allowed_names(
                context, AclOperation.DESCRIBE, ResourceType.TOPIC, names
            )
        ) < len(set(names)):
            # As Kafka's KafkaApis: every subscribed topic name must be describable.
            return make_response(
                CONSUMER_GROUP_HEARTBEAT,
                version,
                {"error_code": ErrorCode.topic_authorization_failed, "member_epoch": 0},
            )
        owned = request.topic_partitions
        result = await self._coordinator.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=_millis(request.rebalance_timeout),
                subscribed_topic_names=(
                    tuple(request.subscribed_topic_names)
                    if request.subscribed_topic_names is not None
                    else None
                ),
                # kio's v0 schema predates the regex field (Kafka's v0 has it, unused before 4.0).
                subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
                server_assignor=request.server_assignor,
                owned=(
                    None
                    if owned is None
                    else [(t.topic_id, list(t.partitions)) for t in owned if t.topic_id]
                ),
                client_id=context.client_id or "",
                client_host=kafka_client_host(context.client_host),
                api_version=version,
            )
        )
        body: dict[str, Any] = {
            "error_code": result.error,
            "error_message": result.message,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": timedelta(milliseconds=result.heartbeat_interval_ms),
        }
        if result.assignment is not None:
            body["assignment"] = {
                "topic_partitions": [
                    {"topic_id": topic_id, "partitions": sorted(partitions)}
                    for topic_id, partitions in sorted(result.assignment.items())
                ]
            }
        return make_response(CONSUMER_GROUP_HEARTBEAT, version, body)

    async def describe(self, request: Any, context: RequestContext) -> Any:
        allowed = await self._authorization.allowed_names(
            context, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_ids
        )
        names = self._coordinator.topic_names_by_id()
        groups: list[dict[str, Any]] = []
        for group_id in request.group_ids:
            if group_id not in allowed:
                groups.append(_error_group(group_id, ErrorCode.group_authorization_failed, None))
                continue
            error, message, group = self._coordinator.consumer_group(group_id)
            if group is None:
                groups.append(_error_group(group_id, error, message))
                continue
            operations = (
                await self._authorization.authorized_operations(
                    context, ResourceType.GROUP, group_id
                )
                if request.include_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            groups.append(
                _described(
                    group, names, preferred_assignor(group, self._coordinator.consumer.assignors)
                )
                | {"authorized_operations": operations}
            )
        return make_response(CONSUMER_GROUP_DESCRIBE, context.api_version, {"groups": groups})


def _millis(delta: timedelta | int) -> int:
    if isinstance(delta, timedelta):
        return delta // timedelta(milliseconds=1)
    return int(delta)


def _error_group(group_id: str, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "error_code": error,
        "error_message": message,
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "assignor_name": "",
        "members": [],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _described(
    group: ConsumerGroup, names: Mapping[uuid.UUID, str], assignor: str
) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_state": group.state.value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": assignor,
        "members": [
            _member(member, group.target_of(member.member_id), names)
            for member in group.members.values()
        ],
    }


def _member(
    member: ConsumerGroupMember, target: Assignment, names: Mapping[uuid.UUID, str]
) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "member_epoch": member.member_epoch,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "subscribed_topic_regex": member.subscribed_topic_regex,
        "assignment": {"topic_partitions": _topic_partitions(member.assigned_partitions, names)},
        "target_assignment": {"topic_partitions": _topic_partitions(target, names)},
        "member_type": (
            CLASSIC_MEMBER_TYPE if member.uses_classic_protocol else CONSUMER_MEMBER_TYPE
        ),
    }


def _topic_partitions(
    assignment: Assignment, names: Mapping[uuid.UUID, str]
) -> list[dict[str, Any]]:
    """Partitions by topic, with names; a topic deleted since the assignment is left out."""
    return [
        {"topic_id": topic_id, "topic_name": names[topic_id], "partitions": sorted(partitions)}
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
        if topic_id in names and partitions
    ]
