"""The built-in ACL authorizer decides as Kafka's StandardAuthorizer does."""

from __future__ import annotations

import logging
import uuid

import pytest
from krust.plugins.acls import filter_matches
from krust.plugins.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from krust.plugins.standard_authorizer import StandardAuthorizer

Op, T, P = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    operation: AclOperation,
    name: str,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    resource_type: ResourceType = T.TOPIC,
    pattern: PatternType = P.LITERAL,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer(*acls: AclBinding, **configs: str) -> StandardAuthorizer:
    built_in = StandardAuthorizer()
    built_in.configure(configs)
    built_in.load_acls({uuid.uuid4(): binding for binding in acls})
    return built_in


def allowed(
    built_in: StandardAuthorizer,
    operation: AclOperation,
    name: str,
    *,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    resource_type: ResourceType = T.TOPIC,
) -> bool:
    context = AuthorizableRequestContext(principal, "PLAINTEXT", "PLAINTEXT", host, None, 0, 9)
    action = Action(operation, ResourcePattern(resource_type, name))
    [result] = built_in.authorize(context, [action])
    return result == AuthorizationResult.ALLOWED


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_and_alter_imply_describe(granted: AclOperation) -> None:
    built_in = authorizer(acl(granted, "orders"))
    assert allowed(built_in, Op.DESCRIBE, "orders")
    assert not allowed(built_in, Op.DESCRIBE_CONFIGS, "orders")
    assert not allowed(built_in, Op.CREATE, "orders")


def test_alter_configs_implies_describe_configs_and_all_implies_everything() -> None:
    assert allowed(authorizer(acl(Op.ALTER_CONFIGS, "orders")), Op.DESCRIBE_CONFIGS, "orders")
    assert not allowed(authorizer(acl(Op.DESCRIBE_CONFIGS, "orders")), Op.ALTER_CONFIGS, "orders")
    everything = authorizer(acl(Op.ALL, "orders"))
    assert all(allowed(everything, op, "orders") for op in (Op.READ, Op.WRITE, Op.CREATE, Op.ALTER))


def test_a_deny_decides_only_its_own_operation_and_wins_over_any_allow() -> None:
    built_in = authorizer(acl(Op.ALL, "orders"), acl(Op.READ, "orders", DENY))
    assert not allowed(built_in, Op.READ, "orders")
    # DENY READ does not deny DESCRIBE, which the ALLOW ALL grants.
    assert allowed(built_in, Op.DESCRIBE, "orders")
    wildcard_deny = authorizer(acl(Op.WRITE, "orders"), acl(Op.ALL, "*", DENY, principal="User:*"))
    assert not allowed(wildcard_deny, Op.WRITE, "orders")


def test_prefixed_and_wildcard_patterns_and_principals() -> None:
    built_in = authorizer(
        acl(Op.READ, "sales-", pattern=P.PREFIXED),
        acl(Op.WRITE, "*", principal="User:*"),
    )
    assert allowed(built_in, Op.READ, "sales-eu")
    assert not allowed(built_in, Op.READ, "salesforce")
    assert allowed(built_in, Op.WRITE, "anything", principal="User:bob")
    assert not allowed(built_in, Op.READ, "sales-eu", principal="User:bob")


def test_hosts_must_match_unless_the_acl_says_any_host() -> None:
    built_in = authorizer(acl(Op.READ, "orders", host="10.0.0.1"))
    assert allowed(built_in, Op.READ, "orders", host="10.0.0.1")
    assert not allowed(built_in, Op.READ, "orders", host="10.0.0.2")


def test_resource_types_are_kept_apart() -> None:
    built_in = authorizer(acl(Op.READ, "orders", resource_type=T.GROUP))
    assert allowed(built_in, Op.READ, "orders", resource_type=T.GROUP)
    assert not allowed(built_in, Op.READ, "orders")


def test_super_users_may_do_anything() -> None:
    built_in = authorizer(
        acl(Op.ALL, "*", DENY, principal="User:*"), **{"super.users": "User:admin;User:ops"}
    )
    assert allowed(built_in, Op.WRITE, "orders", principal="User:admin")
    assert allowed(
        built_in, Op.ALTER, "kafka-cluster", principal="User:ops", resource_type=T.CLUSTER
    )
    assert not allowed(built_in, Op.WRITE, "orders", principal="User:alice")


def test_a_resource_without_acls_is_open_only_if_configured() -> None:
    closed = authorizer(acl(Op.READ, "orders"))
    opened = authorizer(acl(Op.READ, "orders"), **{"allow.everyone.if.no.acl.found": "true"})
    assert not allowed(closed, Op.READ, "payments")
    assert allowed(opened, Op.READ, "payments")
    # An ACL on the resource, for anyone, closes it to everyone else.
    assert not allowed(opened, Op.READ, "orders", principal="User:bob")


def test_by_resource_type_needs_an_allow_no_deny_cancels() -> None:
    context = AuthorizableRequestContext("User:alice", "PLAINTEXT", "PLAINTEXT", "h", None, 22, 4)
    write_some = authorizer(acl(Op.WRITE, "orders"))
    assert (
        write_some.authorize_by_resource_type(context, Op.WRITE, T.TOPIC)
        is AuthorizationResult.ALLOWED
    )
    cancelled = authorizer(acl(Op.WRITE, "orders"), acl(Op.WRITE, "ord", DENY, pattern=P.PREFIXED))
    assert (
        cancelled.authorize_by_resource_type(context, Op.WRITE, T.TOPIC)
        is AuthorizationResult.DENIED
    )
    assert (
        authorizer().authorize_by_resource_type(context, Op.WRITE, T.TOPIC)
        is AuthorizationResult.DENIED
    )


def test_filters_select_bindings_as_kafkas_acl_binding_filter() -> None:
    literal = acl(Op.READ, "orders")
    wildcard = acl(Op.WRITE, "*")
    prefixed = acl(Op.READ, "ord", pattern=P.PREFIXED)
    bindings = [literal, wildcard, prefixed]

    def matching(**fields: object) -> list[AclBinding]:
        wanted = AclBindingFilter(**fields)  # type: ignore[arg-type]
        return [b for b in bindings if filter_matches(wanted, b)]

    assert matching() == bindings
    assert matching(pattern_type=P.MATCH, name="orders") == bindings
    assert matching(pattern_type=P.MATCH, name="other") == [wildcard]
    assert matching(pattern_type=P.LITERAL, name="orders") == [literal]
    assert matching(pattern_type=P.PREFIXED) == [prefixed]
    assert matching(operation=Op.WRITE) == [wildcard]
    assert matching(principal="User:bob") == []


def test_decisions_are_audited_in_kafkas_words_when_the_action_asks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    built_in = authorizer(acl(Op.READ, "orders"))
    context = AuthorizableRequestContext(
        "User:alice", "PLAINTEXT", "PLAINTEXT", "10.0.0.1", None, 0, 9
    )
    quiet = Action(Op.WRITE, ResourcePattern(T.TOPIC, "orders"), log_if_denied=False)
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        built_in.authorize(context, [Action(Op.WRITE, ResourcePattern(T.TOPIC, "orders")), quiet])
    assert [r.getMessage() for r in caplog.records] == [
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.1 on resource = "
        "TOPIC:LITERAL:orders"
    ]
