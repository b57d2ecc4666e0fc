"""What the coordinator answers, independent of API versions (handlers map it to kio)."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = [
    "CoordinatorError",
    "CoordinatorLocation",
    "DescribedGroup",
    "DescribedMember",
    "ErrorCode",
    "JoinGroupResult",
    "JoinedMember",
    "ListedGroup",
    "SyncGroupResult",
]


class CoordinatorError(Exception):
    """A request the coordinator refuses with a Kafka error code."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass(frozen=True)
class JoinedMember:
    """A member as the leader sees it in JoinGroup: its metadata for the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class CoordinatorLocation:
    error: ErrorCode
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    # A KIP-848 consumer group is not described by DescribeGroups: it answers Dead.
    is_classic: bool = True


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
