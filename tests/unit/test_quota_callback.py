"""The quota callback service against a fake core: clients the core queues are answered on the
plugin's thread, failures leave the client unlimited, `reset_quotas` reaches the core, and a
class that is no callback stops start-up naming the key."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from collections.abc import Mapping, Sequence

import pytest
from krust.config.errors import ConfigError
from krust.plugins import ClientQuotaType, QuotaCallbackContext
from krust.security.quota_callback import Limits, QuotaCallbackService, load_callback


class FakeQuotaCore:
    def __init__(self, clients: list[tuple[str, str]]) -> None:
        self.pending = list(clients)
        self.answers: dict[tuple[str, str], Limits] = {}
        self.resets = 0
        self.callback_used = False
        self.answered = threading.Event()

    def use_quota_callback(self) -> None:
        self.callback_used = True

    def take_unresolved_quota_clients(self, timeout_s: float) -> list[tuple[str, str]]:
        taken, self.pending = self.pending, []
        if not taken:
            threading.Event().wait(min(timeout_s, 0.01))
        return taken

    def set_quota_callback_limits(self, limits: Sequence[tuple[tuple[str, str], Limits]]) -> None:
        self.answers.update(limits)
        self.answered.set()

    def reset_quota_callback_limits(self) -> None:
        self.resets += 1


class Plans:
    def __init__(self) -> None:
        self.context: QuotaCallbackContext | None = None

    def start(self, context: QuotaCallbackContext) -> None:
        self.context = context

    def quota_limit(
        self, quota_type: ClientQuotaType, principal: str, client_id: str
    ) -> float | None:
        if client_id == "broken":
            raise RuntimeError("no plan")
        if quota_type is ClientQuotaType.PRODUCE and principal == "User:alice":
            return 1000.0
        return None


def test_queued_clients_are_answered_and_failures_left_unlimited() -> None:
    core = FakeQuotaCore([("alice", "app"), ("bob", "broken")])
    plans = Plans()
    service = QuotaCallbackService(plans, core, "cluster", 1, timeout_s=5)
    assert core.answered.wait(5)
    assert core.callback_used
    assert core.answers == {
        ("alice", "app"): (1000.0, None, None),
        ("bob", "broken"): (None, None, None),
    }
    assert plans.context is not None and plans.context.cluster_id == "cluster"
    plans.context.reset_quotas()
    assert core.resets == 1
    asyncio.run(service.close())


class NotACallback:
    def configure(self, configs: Mapping[str, str]) -> None:
        pass


def test_a_class_without_quota_limit_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("krust_test_not_a_callback")
    module.NotACallback = NotACallback  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(ConfigError) as caught:
        load_callback({"client.quota.callback.class": "krust_test_not_a_callback:NotACallback"})
    assert caught.value.key == "client.quota.callback.class"
    assert "has no quota_limit method" in str(caught.value)
    assert load_callback({"client.quota.callback.class": None}) is None
