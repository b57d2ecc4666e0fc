"""AlterClientQuotas and DescribeClientQuotas against the controller with an in-memory core:
Kafka's validation and error codes, filters, ClientQuotaRecords replayed after a restart and
written into snapshots, and the quotas pushed to the core."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from krust.bridge.protocol import build_entity
from krust.controller.client_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED
from krust.controller.controller import Controller
from krust.controller.quota_apis import ClientQuotaApis

from .conftest import FakeCore, LoopRunner
from .test_controller import context, make_config

Entity = list[tuple[str, str | None]]


@pytest.fixture
def controller(tmp_path: Path, fake_core: FakeCore) -> Controller:
    return Controller.open(make_config([tmp_path]), fake_core)


def alter(
    run: LoopRunner,
    controller: Controller,
    *entries: tuple[Entity, list[tuple[str, float | None]]],
    validate_only: bool = False,
) -> list[tuple[ErrorCode, str | None]]:
    request = build_entity(
        load_request_schema(49, 1),
        {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
                }
                for entity, ops in entries
            ],
            "validate_only": validate_only,
        },
    )
    response = run(ClientQuotaApis(controller).alter_client_quotas(request, context(49, 1)))
    return [(entry.error_code, entry.error_message) for entry in response.entries]


def describe(
    run: LoopRunner,
    controller: Controller,
    *components: tuple[str, int, str | None],
    strict: bool = False,
) -> Any:
    request = build_entity(
        load_request_schema(48, 1),
        {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        },
    )
    return run(ClientQuotaApis(controller).describe_client_quotas(request, context(48, 1)))


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == ErrorCode.none, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


OK = (ErrorCode.none, None)


def test_quotas_are_set_described_and_removed(run: LoopRunner, controller: Controller) -> None:
    assert alter(
        run,
        controller,
        ([("client-id", "app")], [("producer_byte_rate", 1024.0)]),
        ([("user", None)], [("consumer_byte_rate", 2048.0), ("request_percentage", 12.5)]),
        ([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 10.0)]),
    ) == [OK, OK, OK]
    everything = described(describe(run, controller))
    assert everything == {
        (("client-id", "app"),): {"producer_byte_rate": 1024.0},
        (("user", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 12.5},
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 10.0},
    }
    assert described(describe(run, controller, ("user", MATCH_DEFAULT, None), strict=True)) == {
        (("user", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 12.5}
    }
    assert list(described(describe(run, controller, ("user", MATCH_EXACT, "alice")))) == [
        (("client-id", None), ("user", "alice"))
    ]
    assert len(described(describe(run, controller, ("user", MATCH_SPECIFIED, None)))) == 2
    assert alter(run, controller, ([("client-id", "app")], [("producer_byte_rate", None)])) == [OK]
    assert (("client-id", "app"),) not in described(describe(run, controller))


def test_the_core_gets_the_quotas_at_start_and_after_each_change(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    assert fake_core.client_quotas == []
    alter(run, controller, ([("client-id", "app")], [("producer_byte_rate", 1024.0)]))
    assert fake_core.client_quotas == [([("client-id", "app")], {"producer_byte_rate": 1024.0})]


def test_quotas_survive_a_restart_and_a_snapshot(
    run: LoopRunner, controller: Controller, fake_core: FakeCore, tmp_path: Path
) -> None:
    alter(run, controller, ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0)]))
    alter(run, controller, ([("user", "bob")], [("producer_byte_rate", 100.0)]))
    expected = dict(controller.image.client_quotas)
    restarted = Controller.open(make_config([tmp_path]), fake_core.reopen())
    assert restarted.image.client_quotas == expected
    snapshot_core = fake_core.reopen()
    fake_core.trigger_metadata_snapshot()
    from_snapshot = Controller.open(make_config([tmp_path]), snapshot_core.reopen())
    assert from_snapshot.image.client_quotas == expected
    assert from_snapshot._core.client_quotas == [  # type: ignore[attr-defined]
        ([("ip", "10.0.0.1")], {"connection_creation_rate": 5.0}),
        ([("user", "bob")], {"producer_byte_rate": 100.0}),
    ]


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        (
            [("group", "g")],
            [("producer_byte_rate", 1.0)],
            "Unhandled client quota entity type: group",
        ),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        (
            [("ip", "10.0.0.1"), ("user", "a")],
            [("connection_creation_rate", 1.0)],
            "IP entity should not be combined",
        ),
        ([("ip", "no such host.invalid")], [("connection_creation_rate", 1.0)], "not a valid IP"),
        ([("user", "a")], [("connection_creation_rate", 1.0)], "Invalid configuration key"),
        ([("ip", "10.0.0.1")], [("producer_byte_rate", 1.0)], "Invalid configuration key"),
        ([("user", "a")], [("controller_mutation_rate", 5.0)], "not supported by krust"),
        ([("user", "a")], [("producer_byte_rate", 0.0)], "must be greater than 0"),
        ([("user", "a")], [("producer_byte_rate", 1.5)], "cannot be a fractional value"),
        ([("ip", None)], [("connection_creation_rate", 2.0**31)], "too large for an INT"),
        (
            [("user", "a")],
            [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
            "Duplicate quota key",
        ),
        ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0)], "duplicate entity entry"),
    ],
)
def test_bad_alterations_are_invalid_request_and_change_nothing(
    run: LoopRunner,
    controller: Controller,
    entity: Entity,
    ops: list[tuple[str, float | None]],
    message: str,
) -> None:
    good = ([("client-id", "ok")], [("request_percentage", 50.0)])
    (error, text), second = alter(run, controller, (entity, ops), good)
    assert error == ErrorCode.invalid_request
    assert text is not None and message in text
    assert second == OK
    assert list(controller.image.client_quotas) == [(("client-id", "ok"),)]


def test_validate_only_writes_nothing(run: LoopRunner, controller: Controller) -> None:
    change = ([("user", "a")], [("producer_byte_rate", 1.0)])
    assert alter(run, controller, change, validate_only=True) == [OK]
    assert not controller.image.client_quotas


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", MATCH_EXACT, "x")], ErrorCode.invalid_request, "Invalid empty entity type."),
        ([("topic", MATCH_EXACT, "x")], ErrorCode.unsupported_version, "Unsupported entity"),
        ([("user", MATCH_EXACT, None)], ErrorCode.invalid_request, "set match string to null"),
        ([("user", MATCH_DEFAULT, "x")], ErrorCode.invalid_request, "also specified a match"),
        ([("user", 7, None)], ErrorCode.invalid_request, "Unknown match type 7"),
        (
            [("user", MATCH_DEFAULT, None), ("user", MATCH_SPECIFIED, None)],
            ErrorCode.invalid_request,
            "cannot appear more than once",
        ),
        (
            [("ip", MATCH_SPECIFIED, None), ("client-id", MATCH_SPECIFIED, None)],
            ErrorCode.invalid_request,
            "IP filter component should not be used",
        ),
    ],
)
def test_bad_filters_answer_kafkas_errors(
    run: LoopRunner,
    controller: Controller,
    components: list[tuple[str, int, str | None]],
    error: ErrorCode,
    message: str,
) -> None:
    response = describe(run, controller, *components)
    assert response.error_code == error
    assert message in response.error_message
    assert response.entries is None
