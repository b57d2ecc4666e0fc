"""The built-in ACL authorizer (Kafka's StandardAuthorizer): ACLs from the metadata log,
`super.users`, `allow.everyone.if.no.acl.found`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from krust.plugins.acls import decide, filter_matches, operation_grants
from krust.plugins.authorizer import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    AuthorizerContext,
    PatternType,
    ResourceType,
)

# Kafka's own class name selects this authorizer too, so Kafka configs work unchanged.
KAFKA_CLASS_NAME = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's audit logger name; debug, as decisions on the Python side are not cached.
audit = logging.getLogger("kafka.authorizer.logger")
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


class StandardAuthorizer:
    """Allows what an ACL allows and no DENY forbids; super users may do anything."""

    def __init__(self) -> None:
        self.super_users: frozenset[str] = frozenset()
        self.allow_if_no_acl = False
        self._acls: Mapping[object, AclBinding] = MappingProxyType({})
        self._by_type: dict[ResourceType, list[AclBinding]] = {}

    def configure(self, configs: Mapping[str, str]) -> None:
        users = str(configs.get("super.users") or "")
        # Kafka separates super users with ';' (a principal name may contain ',').
        self.super_users = frozenset(u.strip() for u in users.split(";") if u.strip())
        flag = str(configs.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
        self.allow_if_no_acl = flag == "true"

    def start(self, context: AuthorizerContext) -> None:
        pass

    def close(self) -> None:
        pass

    def load_acls(self, acls: Mapping[object, AclBinding]) -> None:
        """Every ACL in force (by id); replaces the previous set."""
        self._acls = acls
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in acls.values():
            by_type.setdefault(binding.pattern.resource_type, []).append(binding)
        self._by_type = by_type

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._acls.values() if filter_matches(binding_filter, b)]

    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        return [self._authorize(context, action) for action in actions]

    def _authorize(
        self, context: AuthorizableRequestContext, action: Action
    ) -> AuthorizationResult:
        resource = action.resource
        allowed = context.principal in self.super_users or decide(
            self._by_type.get(resource.resource_type, ()),
            context.principal,
            context.client_address,
            action.operation,
            resource.resource_type,
            resource.name,
            self.allow_if_no_acl,
        )
        if (action.log_if_allowed if allowed else action.log_if_denied) and audit.isEnabledFor(
            logging.DEBUG
        ):
            audit.debug(
                "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s",
                context.principal,
                "Allowed" if allowed else "Denied",
                action.operation.name,
                context.client_address,
                resource.resource_type.name,
                resource.pattern_type.name,
                resource.name,
            )
        return ALLOWED if allowed else DENIED

    def authorize_by_resource_type(
        self,
        context: AuthorizableRequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> AuthorizationResult:
        """Whether the principal may do `operation` on at least one resource of the type
        (Kafka's Authorizer.authorizeByResourceType): some ALLOW not cancelled by a DENY
        covering it."""
        if context.principal in self.super_users:
            return ALLOWED
        principals = {context.principal, WILDCARD_PRINCIPAL}
        hosts = {context.client_address, WILDCARD_HOST}
        relevant = [
            b
            for b in self._by_type.get(resource_type, ())
            if b.entry.principal in principals
            and b.entry.host in hosts
            and operation_grants(b.entry.operation, b.entry.permission_type, operation)
        ]
        denies = [b.pattern for b in relevant if b.entry.permission_type == AclPermissionType.DENY]
        if any(
            p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE for p in denies
        ):
            return DENIED

        def cancelled(allow: AclBinding) -> bool:
            name = allow.pattern.name
            return any(
                (d.pattern_type == PatternType.PREFIXED and name.startswith(d.name))
                or (d == allow.pattern)
                for d in denies
            )

        allows = [b for b in relevant if b.entry.permission_type == AclPermissionType.ALLOW]
        if any(not cancelled(b) for b in allows):
            return ALLOWED
        no_acls = not self._by_type.get(resource_type)
        return ALLOWED if self.allow_if_no_acl and no_acls else DENIED
