"""The Authorizer plugin interface, modelled on Kafka's (KIP-504), with Kafka's ACL model.

An authorizer is a plain class named by `authorizer.class.name`. It follows the plugin life
cycle (`configure`, `start`, `close`; see docs/plugins.md) and answers `authorize(context,
actions)` with one result per action. Enum names and codes are Kafka's, as on the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from krust.plugins.lifecycle import PluginContext


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation (org.apache.kafka.common.acl)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType (org.apache.kafka.common.resource)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's PatternType: ACLs are LITERAL or PREFIXED; filters may also say ANY or MATCH."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    """Kafka's AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AuthorizationResult(enum.Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name (Kafka's Resource.CLUSTER_NAME)
WILDCARD_RESOURCE = "*"  # a LITERAL ACL on "*" applies to every resource of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

_O = AclOperation
# Kafka's AclEntry.supportedOperations: what KIP-430's authorized operations range over.
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ,
        _O.WRITE,
        _O.CREATE,
        _O.DESCRIBE,
        _O.DELETE,
        _O.ALTER,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


@dataclass(frozen=True)
class ResourcePattern:
    """A resource an ACL applies to (LITERAL or PREFIXED), or one an action names (LITERAL)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class Action:
    """One thing a request wants to do (Kafka's Action). `log_if_allowed`/`log_if_denied` say
    whether the outcome is worth an audit line (False for filtering, e.g. Metadata's topics)."""

    operation: AclOperation
    resource: ResourcePattern
    log_if_allowed: bool = True
    log_if_denied: bool = True


@dataclass(frozen=True)
class AuthorizableRequestContext:
    """Who asks, and with which request (Kafka's AuthorizableRequestContext)."""

    principal: str  # "User:alice"
    listener_name: str
    security_protocol: str
    client_address: str  # the client's ip
    client_id: str | None
    request_type: int  # the api key
    request_version: int


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    """An ACL: a pattern and an entry (Kafka's AclBinding)."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """Matches ACL bindings (DescribeAcls, DeleteAcls); None and ANY match everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


@dataclass(frozen=True)
class AuthorizerContext(PluginContext):
    """What an authorizer gets at `start`: the cluster, and `invalidate()` to make the broker
    forget the decisions it cached (call it when the plugin's policy changed)."""

    invalidate: Callable[[], None] = field(default=lambda: None)


@runtime_checkable
class Authorizer(Protocol):
    """Kafka's Authorizer (KIP-504). `authorize` is called on the plugin's own thread, one call
    at a time; it must return one result per action, in order. Decisions are cached by the
    broker per (principal, host, operation, resource) until ACLs change or the plugin calls
    `AuthorizerContext.invalidate()`."""

    def configure(self, configs: Mapping[str, str]) -> None: ...

    def start(self, context: AuthorizerContext) -> None: ...

    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]: ...

    def close(self) -> None: ...


@runtime_checkable
class AclAuthorizer(Authorizer, Protocol):
    """An authorizer whose ACLs are the metadata log's (Kafka's ClusterMetadataAuthorizer):
    CreateAcls/DeleteAcls write AccessControlEntryRecords and the broker hands every change to
    `load_acls`. Only such an authorizer serves the ACL APIs; with any other they answer
    SECURITY_DISABLED."""

    def load_acls(self, acls: Mapping[object, AclBinding]) -> None: ...

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    def authorize_by_resource_type(
        self,
        context: AuthorizableRequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> AuthorizationResult: ...
