"""A ConsumerGroupHeartbeat as the coordinator sees it, its checks, and the answer.

`validate` is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (done before the group is
looked at); `check_member_epoch` is its throwIfConsumerGroupMemberEpochIsInvalid.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, replace
from typing import TypeVar

from krust.group.consumer.group_spec import Assignment
from krust.group.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
)
from krust.group.consumer.reconciliation import OwnedPartitions
from krust.group.consumer.subscription import compile_regex
from krust.group.results import CoordinatorError, ErrorCode

T = TypeVar("T")

# ConsumerGroupHeartbeat v1 (KIP-1082): the consumer generates its member id.
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: OwnedPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): url-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def validate(request: HeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, in its order."""

    def invalid(message: str) -> CoordinatorError:
        return CoordinatorError(ErrorCode.invalid_request, message)

    epoch = request.member_epoch
    if (
        request.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION
        or epoch > 0
        or epoch == LEAVE_GROUP_MEMBER_EPOCH
    ) and not request.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id.strip():
        raise invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise CoordinatorError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {request.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}.",
        )
    if request.subscribed_topic_regex:
        compile_regex(request.subscribed_topic_regex)


def updated_member(member: ConsumerGroupMember, request: HeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the heartbeat changed: a null field (-1 for the rebalance timeout)
    means "as before", as Kafka's maybeUpdate* builders read it; an empty regex clears it."""

    def given(value: T | None, current: T) -> T:
        return current if value is None else value

    regex = request.subscribed_topic_regex
    return replace(
        member,
        instance_id=given(request.instance_id, member.instance_id),
        rack_id=given(request.rack_id, member.rack_id),
        rebalance_timeout_ms=(
            member.rebalance_timeout_ms
            if request.rebalance_timeout_ms == -1
            else request.rebalance_timeout_ms
        ),
        server_assignor=given(request.server_assignor, member.server_assignor),
        subscribed_topic_names=given(request.subscribed_topic_names, member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex if regex is None else (regex or None),
        client_id=request.client_id,
        client_host=request.client_host,
        # A consumer-protocol heartbeat: the member no longer speaks the classic protocol.
        classic_member_metadata=None,
    )


def check_member_epoch(
    member: ConsumerGroupMember, received: int, owned: OwnedPartitions | None
) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    # A smaller epoch is accepted only when the response that moved the member to its current
    # epoch was lost: it comes with the previous epoch and owns no partition it should not.
    if received < member.member_epoch and (
        received != member.previous_member_epoch
        or not _is_subset(owned, member.assigned_partitions)
    ):
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )


def _is_subset(owned: OwnedPartitions | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(
        topic_id in assigned and set(partitions) <= assigned[topic_id]
        for topic_id, partitions in owned
    )
