"""The broker's Authorization: loading by config name, containing a failing plugin, the
answers the core gets, and the configs a plugin is configured with."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from krust.config.broker import load_config
from krust.config.errors import ConfigError
from krust.plugins.authorizer import (
    AclOperation,
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    AuthorizerContext,
    PatternType,
    ResourceType,
)
from krust.plugins.standard_authorizer import StandardAuthorizer
from krust.security.authorization import Authorization

TOPIC, ANY = int(ResourceType.TOPIC), int(PatternType.ANY)
WRITE = int(AclOperation.WRITE)


class TenantOnly:
    """Allows actions on resources named after the principal's name."""

    configs: Mapping[str, str] = {}

    def configure(self, configs: Mapping[str, str]) -> None:
        TenantOnly.configs = configs

    def start(self, context: AuthorizerContext) -> None:
        pass

    def close(self) -> None:
        pass

    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        tenant = context.principal.partition(":")[2]
        return [
            AuthorizationResult.ALLOWED
            if a.resource.name.startswith(tenant)
            else AuthorizationResult.DENIED
            for a in actions
        ]


class Miscounts(TenantOnly):
    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        return [AuthorizationResult.ALLOWED]


@pytest.fixture
def plugins() -> Iterator[str]:
    module = types.ModuleType("krust_test_authorizers")
    module.TenantOnly = TenantOnly  # type: ignore[attr-defined]
    module.Miscounts = Miscounts  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def ask(authorization: Authorization, principal: str, *names: str) -> list[bool] | None:
    actions = [(WRITE, TOPIC, int(PatternType.LITERAL), name) for name in names]
    return authorization.core_callback(
        principal, "PLAINTEXT", "PLAINTEXT", "10.0.0.1", "client", 0, 9, actions
    )


def test_a_plugin_gets_the_broker_configs_and_its_own_keys(plugins: str, tmp_path: Path) -> None:
    config = load_config(
        None,
        {},
        [
            f"log.dirs={tmp_path}",
            f"authorizer.class.name={plugins}:TenantOnly",
            "tenant.separator=-",
        ],
    )
    authorization = Authorization.from_config(config, config.originals())
    assert TenantOnly.configs["tenant.separator"] == "-"
    assert TenantOnly.configs["auto.create.topics.enable"] == "true"
    assert ask(authorization, "User:acme", "acme-orders", "globex-orders") == [True, False]


def test_unknown_keys_are_still_refused_without_a_plugin(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tenant\.separator"):
        load_config(None, {}, [f"log.dirs={tmp_path}", "tenant.separator=-"])


def test_kafkas_class_name_selects_the_built_in_authorizer(tmp_path: Path) -> None:
    config = load_config(
        None,
        {},
        [
            f"log.dirs={tmp_path}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
        ],
    )
    authorization = Authorization.from_config(config, config.originals())
    assert isinstance(authorization.plugin, StandardAuthorizer)
    assert authorization.manages_acls
    assert ask(authorization, "User:admin", "anything") == [True]
    assert ask(authorization, "User:alice", "anything") == [False]


def test_a_malformed_answer_is_a_failure_the_core_does_not_cache() -> None:
    authorization = Authorization(Miscounts(), timeout_s=5)
    assert ask(authorization, "User:acme", "acme-a", "acme-b") is None
    authorization.close()


def test_by_resource_type_goes_to_the_authorizers_method_or_denies() -> None:
    built_in = StandardAuthorizer()
    built_in.configure({"super.users": "User:admin"})
    with_method = Authorization(built_in)
    without = Authorization(TenantOnly())
    by_type = [(WRITE, TOPIC, ANY, "")]
    core = ("PLAINTEXT", "PLAINTEXT", "h", None, 22, 4, by_type)
    assert with_method.core_callback("User:admin", *core) == [True]
    assert without.core_callback("User:admin", *core) == [False]


class CannotStart(TenantOnly):
    def start(self, context: AuthorizerContext) -> None:
        raise RuntimeError("no policy store")


def test_an_authorizer_that_cannot_start_is_a_config_error() -> None:
    authorization = Authorization(CannotStart(), timeout_s=5)
    with pytest.raises(
        ConfigError, match=r"CannotStart\.start failed: RuntimeError: no policy store"
    ):
        authorization.start("cluster", 1, lambda: None)
    authorization.close()
