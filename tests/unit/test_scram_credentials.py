"""SCRAM credentials (KIP-554): AlterUserScramCredentials / DescribeUserScramCredentials with
Kafka's errors, UserScramCredentialRecords holding only derived keys, passed to the core,
written into snapshots and replayed at start-up."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from krust.bridge.dispatcher import RequestContext
from krust.controller import scram
from krust.controller.controller import Controller
from krust.controller.publisher import METADATA_TOPIC
from krust.controller.records import UserScramCredentialRecord, decode_record

from .conftest import FakeCore, LoopRunner
from .test_controller import make_config

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"
PASSWORD = b"alice-secret"


def salted(mechanism: int, password: bytes = PASSWORD, iterations: int = 4096) -> bytes:
    digest = scram.MECHANISMS.get(mechanism, "sha512")
    return hashlib.pbkdf2_hmac(digest, password, SALT, iterations)


def upsertion(name: str, mechanism: int = SHA512, iterations: int = 4096) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=SALT,
        salted_password=salted(mechanism, iterations=iterations),
    )


def deletion(name: str, mechanism: int = SHA512) -> SimpleNamespace:
    return SimpleNamespace(name=name, mechanism=mechanism)


class Apis:
    """The two handlers as the dispatcher would call them."""

    def __init__(self, run: LoopRunner, controller: Controller) -> None:
        self.run = run
        self.handlers: dict[int, Any] = {}
        scram.install(
            controller, lambda key, _lo, _hi, handler, **_: self.handlers.__setitem__(key, handler)
        )

    def call(self, api_key: int, **request: Any) -> Any:
        context = RequestContext(api_key, 0, 1, "test", "127.0.0.1")
        return self.run(self.handlers[api_key](SimpleNamespace(**request), context))

    def alter(
        self, deletions: list[Any], upsertions: list[Any]
    ) -> dict[str, tuple[ErrorCode, str | None]]:
        response = self.call(
            scram.ALTER_USER_SCRAM_CREDENTIALS, deletions=deletions, upsertions=upsertions
        )
        return {r.user: (r.error_code, r.error_message) for r in response.results}

    def describe(self, users: list[str] | None) -> dict[str, Any]:
        named = None if users is None else [SimpleNamespace(name=user) for user in users]
        response = self.call(scram.DESCRIBE_USER_SCRAM_CREDENTIALS, users=named)
        return {
            r.user: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
            for r in response.results
        }


@pytest.fixture
def controller(tmp_path: Path, fake_core: FakeCore) -> Controller:
    return Controller.open(make_config([tmp_path]), fake_core)


def test_alter_stores_derived_keys_only_and_the_core_gets_them(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    apis = Apis(run, controller)
    assert apis.alter([], [upsertion("alice"), upsertion("bob", SHA256)]) == {
        "alice": (ErrorCode.none, None),
        "bob": (ErrorCode.none, None),
    }
    written = [decode_record(r["value"]) for r in fake_core.logs[(METADATA_TOPIC, 0)]]
    stored = [r for r in written if isinstance(r, UserScramCredentialRecord)]
    assert {(r.name, r.mechanism) for r in stored} == {("alice", SHA512), ("bob", SHA256)}
    salted_password = salted(SHA512)
    alice = next(r for r in stored if r.name == "alice")
    client_key = hmac.digest(salted_password, b"Client Key", "sha512")
    assert alice.stored_key == hashlib.sha512(client_key).digest()
    assert alice.server_key == hmac.digest(salted_password, b"Server Key", "sha512")
    for record in fake_core.logs[(METADATA_TOPIC, 0)]:
        assert salted_password not in record["value"] and PASSWORD not in record["value"]
    assert ("alice", SHA512, SALT, alice.stored_key, alice.server_key, 4096) in (
        fake_core.scram_credentials
    )
    assert apis.alter([deletion("bob", SHA256)], []) == {"bob": (ErrorCode.none, None)}
    assert [c[0] for c in fake_core.scram_credentials] == ["alice"]


def test_bad_alterations_get_kafkas_errors_and_change_nothing(
    run: LoopRunner, controller: Controller
) -> None:
    apis = Apis(run, controller)
    results = apis.alter(
        [deletion("ghost"), deletion("twice")],
        [
            upsertion("few", iterations=4095),
            upsertion("many", iterations=16385),
            upsertion("odd", mechanism=3),
            upsertion(""),
            upsertion("twice"),
            upsertion("fine"),
        ],
    )
    assert results == {
        "ghost": (
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        "twice": (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "fine": (ErrorCode.none, None),
    }
    assert list(controller.image.scram_credentials) == [("fine", SHA512)]


def test_describe_lists_mechanisms_and_iterations(run: LoopRunner, controller: Controller) -> None:
    apis = Apis(run, controller)
    apis.alter([], [upsertion("alice", SHA256, 8192)])
    apis.alter([], [upsertion("alice", SHA512)])
    apis.alter([], [upsertion("bob")])
    everyone = {
        "alice": (ErrorCode.none, [(SHA256, 8192), (SHA512, 4096)]),
        "bob": (ErrorCode.none, [(SHA512, 4096)]),
    }
    assert apis.describe(None) == everyone
    assert apis.describe([]) == everyone
    assert apis.describe(["bob", "carol", "alice", "alice"]) == {
        "bob": (ErrorCode.none, [(SHA512, 4096)]),
        "carol": (ErrorCode.resource_not_found, []),
        "alice": (ErrorCode.duplicate_resource, []),
    }


def test_credentials_survive_snapshots_and_restarts(
    run: LoopRunner, tmp_path: Path, fake_core: FakeCore
) -> None:
    config = make_config([tmp_path], "metadata.log.max.record.bytes.between.snapshots=1")
    controller = Controller.open(config, fake_core)
    Apis(run, controller).alter([], [upsertion("alice")])
    assert fake_core.snapshots, "no snapshot was written"
    restarted_core = fake_core.reopen()
    restarted = Controller.open(config, restarted_core)
    assert restarted.image.scram_credentials == controller.image.scram_credentials
    assert restarted_core.scram_credentials == fake_core.scram_credentials != []
