"""CreateAcls, DescribeAcls and DeleteAcls: ACLs as AccessControlEntryRecords in the metadata log
(Kafka's AclControlManager), served when the authorizer takes its ACLs from there; with no such
authorizer they answer SECURITY_DISABLED, as Kafka does without one."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.controller.image import entry_record
from krust.controller.records import (
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from krust.plugins.acls import filter_matches
from krust.plugins.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.controller.controller import Controller

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
NO_AUTHORIZER = "No Authorizer is configured."
NO_ACL_AUTHORIZER = "The configured authorizer does not manage ACLs."
Refusal = tuple[ErrorCode, str]
# Kafka validates the binding itself before it is stored (AclControlManager.validateNewAcl).
_BAD = (0, 1)  # UNKNOWN, ANY


class InvalidAcl(ValueError):
    pass


def _enum(kind: type[Any], code: int, what: str) -> Any:
    try:
        return kind(code)
    except ValueError:
        raise InvalidAcl(f"Invalid {what} {code}") from None


def new_binding(creation: Any) -> AclBinding:
    """The ACL a CreateAcls creation asks for; InvalidAcl says what is wrong with it."""
    resource_type = _enum(ResourceType, creation.resource_type, "resourceType")
    pattern_type = _enum(PatternType, creation.resource_pattern_type, "patternType")
    operation = _enum(AclOperation, creation.operation, "operation")
    permission = _enum(AclPermissionType, creation.permission_type, "permissionType")
    if resource_type in _BAD:
        raise InvalidAcl(f"Invalid resourceType {resource_type.name}")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {pattern_type.name}")
    if operation in _BAD:
        raise InvalidAcl(f"Invalid operation {operation.name}")
    if permission in _BAD:
        raise InvalidAcl(f"Invalid permissionType {permission.name}")
    if not creation.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    principal_type, sep, name = creation.principal.partition(":")
    if not sep or not principal_type or not name:
        raise InvalidAcl(f"Could not parse principal from `{creation.principal}`")
    if creation.host is None:
        raise InvalidAcl("Invalid null host")
    return AclBinding(
        ResourcePattern(resource_type, creation.resource_name, pattern_type),
        AccessControlEntry(creation.principal, creation.host, operation, permission),
    )


def binding_filter(request: Any) -> AclBindingFilter:
    """A DescribeAcls request's or a DeleteAcls filter's AclBindingFilter; InvalidAcl for an
    UNKNOWN code."""
    result = AclBindingFilter(
        resource_type=_enum(ResourceType, request.resource_type_filter, "resourceType"),
        name=request.resource_name_filter,
        pattern_type=_enum(PatternType, request.pattern_type_filter, "patternType"),
        principal=request.principal_filter,
        host=request.host_filter,
        operation=_enum(AclOperation, request.operation, "operation"),
        permission_type=_enum(AclPermissionType, request.permission_type, "permissionType"),
    )
    for value in (
        result.resource_type,
        result.pattern_type,
        result.operation,
        result.permission_type,
    ):
        if value == 0:
            raise InvalidAcl(f"Invalid filter: {type(value).__name__} UNKNOWN")
    return result


def _acl_fields(binding: AclBinding) -> dict[str, Any]:
    return {
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": int(binding.entry.operation),
        "permission_type": int(binding.entry.permission_type),
    }


def _pattern_fields(binding: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": int(binding.pattern.resource_type),
        "resource_name": binding.pattern.name,
        "pattern_type": int(binding.pattern.pattern_type),
    }


class AclAdmin:
    """The ACL APIs, on the controller's lock and log."""

    def __init__(self, controller: Controller, authorization: Authorization) -> None:
        self._controller = controller
        self._authorization = authorization

    def _acls(self) -> Mapping[uuid.UUID, AclBinding]:
        return self._controller.image.acls

    async def _refusal(self, context: RequestContext, operation: AclOperation) -> Refusal | None:
        authorization = self._authorization
        if not authorization.manages_acls:
            message = NO_ACL_AUTHORIZER if authorization.enabled else NO_AUTHORIZER
            return ErrorCode.security_disabled, message
        if not await authorization.allowed(context, operation, ResourceType.CLUSTER):
            return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        return None

    async def create_acls(self, request: Any, context: RequestContext) -> Any:
        refusal = await self._refusal(context, AclOperation.ALTER)
        results: list[dict[str, Any]] = []
        records: list[MetadataRecord] = []
        async with self._controller.lock:
            existing = set(self._acls().values())
            for creation in request.creations:
                if refusal is not None:
                    results.append({"error_code": refusal[0], "error_message": refusal[1]})
                    continue
                try:
                    binding = new_binding(creation)
                except InvalidAcl as error:
                    results.append(
                        {"error_code": ErrorCode.invalid_request, "error_message": str(error)}
                    )
                    continue
                # Creating an ACL that exists succeeds without a second copy.
                if binding not in existing:
                    existing.add(binding)
                    records.append(entry_record(uuid.uuid4(), binding))
                results.append({"error_code": ErrorCode.none, "error_message": None})
            if records:
                await self._controller.commit(records)
        return make_response(CREATE_ACLS, context.api_version, {"results": results})

    async def describe_acls(self, request: Any, context: RequestContext) -> Any:
        def answer(error: ErrorCode, message: str | None, resources: list[Any]) -> Any:
            fields = {"error_code": error, "error_message": message, "resources": resources}
            return make_response(DESCRIBE_ACLS, context.api_version, fields)

        refusal = await self._refusal(context, AclOperation.DESCRIBE)
        if refusal is not None:
            return answer(*refusal, [])
        try:
            wanted = binding_filter(request)
        except InvalidAcl as error:
            return answer(ErrorCode.invalid_request, str(error), [])
        by_pattern: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for binding in self._acls().values():
            if filter_matches(wanted, binding):
                key = tuple(_pattern_fields(binding).values())
                by_pattern.setdefault(key, []).append(_acl_fields(binding))
        resources = [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in sorted(by_pattern.items(), key=lambda item: str(item[0]))
        ]
        return answer(ErrorCode.none, None, resources)

    async def delete_acls(self, request: Any, context: RequestContext) -> Any:
        refusal = await self._refusal(context, AclOperation.ALTER)
        results: list[dict[str, Any]] = []
        records: list[MetadataRecord] = []
        async with self._controller.lock:
            remaining = dict(self._acls())
            for raw in request.filters:
                if refusal is not None:
                    results.append(
                        {
                            "error_code": refusal[0],
                            "error_message": refusal[1],
                            "matching_acls": [],
                        }
                    )
                    continue
                try:
                    wanted = binding_filter(raw)
                except InvalidAcl as error:
                    results.append(
                        {
                            "error_code": ErrorCode.invalid_request,
                            "error_message": str(error),
                            "matching_acls": [],
                        }
                    )
                    continue
                matched = [(i, b) for i, b in remaining.items() if filter_matches(wanted, b)]
                for acl_id, _ in matched:
                    del remaining[acl_id]
                    records.append(RemoveAccessControlEntryRecord(id=acl_id))
                matching = [
                    {"error_code": ErrorCode.none, **_pattern_fields(b), **_acl_fields(b)}
                    for _, b in matched
                ]
                results.append(
                    {"error_code": ErrorCode.none, "error_message": None, "matching_acls": matching}
                )
            if records:
                await self._controller.commit(records)
        return make_response(DELETE_ACLS, context.api_version, {"filter_results": results})


def install(
    controller: Controller,
    authorization: Authorization,
    register: Callable[..., None],
) -> AclAdmin:
    """Route the ACL APIs (the versions Kafka 4 serves)."""
    admin = AclAdmin(controller, authorization)
    register(DESCRIBE_ACLS, 1, 3, admin.describe_acls)
    register(CREATE_ACLS, 2, 3, admin.create_acls, exposure=Exposure.FORWARDED)
    register(DELETE_ACLS, 1, 3, admin.delete_acls, exposure=Exposure.FORWARDED)
    return admin
