"""CreateAcls, DescribeAcls and DeleteAcls on the controller: AccessControlEntryRecords in the
metadata log and snapshots, replayed on restart, the core told to forget cached decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import build_entity
from krust.config.broker import BrokerConfig, load_config
from krust.controller.acls import AclAdmin
from krust.controller.controller import Controller
from krust.controller.image import ImageBuilder, MetadataImage
from krust.controller.records import decode_record, encode_record
from krust.controller.snapshots import image_records
from krust.plugins.authorizer import (
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    ResourceType,
)
from krust.plugins.standard_authorizer import StandardAuthorizer
from krust.security.authorization import Authorization

from .conftest import FakeCore, LoopRunner

ANONYMOUS = "User:ANONYMOUS"


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return load_config(
        None, {}, [f"log.dirs={tmp_path / 'd'}", "listeners=PLAINTEXT://127.0.0.1:19092"]
    )


def built_in(**configs: str) -> Authorization:
    plugin = StandardAuthorizer()
    plugin.configure(configs)
    return Authorization(plugin)


def admin(controller: Controller, authorization: Authorization) -> AclAdmin:
    authorization.use_acls(lambda: controller.image.acls)
    controller.authorization = authorization
    return AclAdmin(controller, authorization)


def context(api_key: int, version: int = 3, principal: str = "User:admin") -> RequestContext:
    return RequestContext(api_key, version, 1, "tool", "127.0.0.1", principal=principal)


def creation(name: str, operation: AclOperation, **fields: Any) -> dict[str, Any]:
    return {
        "resource_type": ResourceType.TOPIC,
        "resource_name": name,
        "resource_pattern_type": PatternType.LITERAL,
        "principal": ANONYMOUS,
        "host": "*",
        "operation": operation,
        "permission_type": AclPermissionType.ALLOW,
        **fields,
    }


def any_filter(**fields: Any) -> dict[str, Any]:
    return {
        "resource_type_filter": ResourceType.ANY,
        "resource_name_filter": None,
        "pattern_type_filter": PatternType.ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
        **fields,
    }


def create_acls(run: LoopRunner, acls: AclAdmin, *creations: dict[str, Any], **ctx: Any) -> Any:
    request = build_entity(load_request_schema(30, 3), {"creations": list(creations)})
    return run(acls.create_acls(request, context(30, **ctx)))


def describe_acls(run: LoopRunner, acls: AclAdmin, **fields: Any) -> Any:
    request = build_entity(load_request_schema(29, 3), any_filter(**fields))
    return run(acls.describe_acls(request, context(29)))


def delete_acls(run: LoopRunner, acls: AclAdmin, *filters: dict[str, Any]) -> Any:
    request = build_entity(load_request_schema(31, 3), {"filters": list(filters)})
    return run(acls.delete_acls(request, context(31)))


def described(response: Any) -> list[tuple[str, int]]:
    return sorted((r.resource_name, a.operation) for r in response.resources for a in r.acls)


def test_acls_are_created_described_deleted_and_survive_a_restart(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    controller = Controller.open(config, fake_core)
    acls = admin(controller, built_in(**{"super.users": "User:admin"}))
    response = create_acls(
        run,
        acls,
        creation("orders", AclOperation.READ),
        creation("orders", AclOperation.READ),
        creation("payments", AclOperation.WRITE),
    )
    assert [r.error_code for r in response.results] == [ErrorCode.none] * 3
    # The same ACL twice is stored once.
    assert described(describe_acls(run, acls)) == [("orders", 3), ("payments", 4)]
    assert fake_core.deltas[-1].get("acls_changed") is True

    restarted = Controller.open(config, fake_core.reopen())
    assert restarted.image.acls == controller.image.acls

    deleted = delete_acls(run, acls, any_filter(resource_name_filter="orders"))
    [result] = deleted.filter_results
    assert [(m.resource_name, m.operation) for m in result.matching_acls] == [("orders", 3)]
    assert described(describe_acls(run, acls)) == [("payments", 4)]
    assert Controller.open(config, fake_core.reopen()).image.acls == controller.image.acls


def test_snapshots_carry_the_acls(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    controller = Controller.open(config, fake_core)
    acls = admin(controller, built_in(**{"super.users": "User:admin"}))
    create_acls(
        run, acls, creation("sales-", AclOperation.ALL, resource_pattern_type=PatternType.PREFIXED)
    )
    records = [decode_record(encode_record(r)) for r in image_records(controller.image)]
    empty = MetadataImage.empty(controller.image.cluster_id, controller.image.node_id)
    replayed = ImageBuilder(empty).replay_all((i, r) for i, r in enumerate(records)).build()
    assert replayed.acls == controller.image.acls


def test_bad_acls_are_invalid_requests_and_the_rest_is_created(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    acls = admin(Controller.open(config, fake_core), built_in(**{"super.users": "User:admin"}))
    response = create_acls(
        run,
        acls,
        creation("t", AclOperation.ANY),
        creation("t", AclOperation.READ, resource_pattern_type=PatternType.MATCH),
        creation("t", AclOperation.READ, principal="nobody"),
        creation("", AclOperation.READ),
        creation("t", AclOperation.READ),
    )
    errors = [r.error_code for r in response.results]
    assert errors == [ErrorCode.invalid_request] * 4 + [ErrorCode.none]
    assert "Invalid operation ANY" in response.results[0].error_message


def test_acl_apis_need_alter_or_describe_on_the_cluster(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    acls = admin(Controller.open(config, fake_core), built_in())
    response = create_acls(run, acls, creation("t", AclOperation.READ))
    assert response.results[0].error_code == ErrorCode.cluster_authorization_failed
    assert describe_acls(run, acls).error_code == ErrorCode.cluster_authorization_failed


def test_without_an_acl_authorizer_the_acl_apis_are_security_disabled(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    acls = admin(Controller.open(config, fake_core), Authorization(None))
    assert create_acls(run, acls, creation("t", AclOperation.READ)).results[0].error_code == (
        ErrorCode.security_disabled
    )
    response = describe_acls(run, acls)
    assert response.error_code == ErrorCode.security_disabled
    assert response.error_message == "No Authorizer is configured."


class AllowsEverything:
    def configure(self, configs: Any) -> None:
        pass

    def start(self, context: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def authorize(self, context: Any, actions: Any) -> list[Any]:
        return [AuthorizationResult.ALLOWED for _ in actions]


def test_an_authorizer_without_acls_leaves_the_acl_apis_security_disabled(
    run: LoopRunner, config: BrokerConfig, fake_core: FakeCore
) -> None:
    acls = admin(Controller.open(config, fake_core), Authorization(AllowsEverything()))  # type: ignore[arg-type]
    response = describe_acls(run, acls)
    assert response.error_code == ErrorCode.security_disabled
    assert response.error_message == "The configured authorizer does not manage ACLs."
