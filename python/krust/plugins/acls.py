"""Kafka's ACL matching rules: which ACLs apply to a request (StandardAuthorizerData) and which
bindings a DescribeAcls/DeleteAcls filter selects (AclBindingFilter.matches)."""

from __future__ import annotations

from collections.abc import Iterable

from krust.plugins.authorizer import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

_O = AclOperation
# An ALLOW of one of these operations also allows DESCRIBE (Kafka's implied operations).
_IMPLIES_DESCRIBE = frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER})


def pattern_applies(pattern: ResourcePattern, resource_type: ResourceType, name: str) -> bool:
    """Whether an ACL's pattern covers the named resource: the same name, the wildcard "*",
    or (PREFIXED) a prefix of the name."""
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type == PatternType.LITERAL:
        return pattern.name in (name, WILDCARD_RESOURCE)
    return pattern.pattern_type == PatternType.PREFIXED and name.startswith(pattern.name)


def operation_grants(
    acl: AclOperation, permission: AclPermissionType, wanted: AclOperation
) -> bool:
    """Whether an ACL of `acl` operation decides `wanted`. A DENY decides only its own
    operation (or ALL); an ALLOW also implies DESCRIBE (by READ, WRITE, DELETE, ALTER) and
    DESCRIBE_CONFIGS (by ALTER_CONFIGS)."""
    if acl in (_O.ALL, wanted):
        return True
    if permission != AclPermissionType.ALLOW:
        return False
    if wanted == _O.DESCRIBE:
        return acl in _IMPLIES_DESCRIBE
    return wanted == _O.DESCRIBE_CONFIGS and acl == _O.ALTER_CONFIGS


def decide(
    acls: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    allow_if_no_acl: bool,
) -> bool:
    """Kafka's rule: a matching DENY wins over any ALLOW; without a matching ALLOW the answer
    is no, unless no ACL at all applies to the resource and `allow_if_no_acl`."""
    principals = (principal, WILDCARD_PRINCIPAL) if principal.startswith("User:") else (principal,)
    resource_has_acls = False
    allowed = False
    for binding in acls:
        if not pattern_applies(binding.pattern, resource_type, name):
            continue
        resource_has_acls = True
        entry = binding.entry
        if entry.principal not in principals or entry.host not in (host, WILDCARD_HOST):
            continue
        if not operation_grants(entry.operation, entry.permission_type, operation):
            continue
        if entry.permission_type == AclPermissionType.DENY:
            return False
        allowed = True
    return allowed or (allow_if_no_acl and not resource_has_acls)


def filter_matches(binding_filter: AclBindingFilter, binding: AclBinding) -> bool:
    """Kafka's AclBindingFilter.matches."""
    f, pattern, entry = binding_filter, binding.pattern, binding.entry
    if f.resource_type not in (ResourceType.ANY, pattern.resource_type):
        return False
    if f.pattern_type == PatternType.MATCH:
        if f.name is None:
            return True
        if pattern.pattern_type == PatternType.LITERAL:
            if pattern.name not in (f.name, WILDCARD_RESOURCE):
                return False
        elif not f.name.startswith(pattern.name):
            return False
    else:
        if f.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        if f.name is not None and f.name != pattern.name:
            return False
    return (
        f.principal in (None, entry.principal)
        and f.host in (None, entry.host)
        and f.operation in (AclOperation.ANY, entry.operation)
        and f.permission_type in (AclPermissionType.ANY, entry.permission_type)
    )
