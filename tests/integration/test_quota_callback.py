"""`client.quota.callback.class` with real broker processes: the example plan-based callback
changes a client's rate at run time; a callback that raises or hangs leaves the broker serving
with one log line; one that cannot be loaded stops start-up with exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .broker_process import broker_command
from .clients.confluent import create_topic
from .kafka_api import produce
from .records import now_ms
from .wire import record_batch

REPO = Path(__file__).resolve().parents[2]
CALLBACK_KEY = "client.quota.callback.class"
# Windows of 1 s: a 100 kB produce against 50 kB/s is throttled for about a second.
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
WAIT_S = 20.0

UNRELIABLE = """
import time
from krust.plugins import ClientQuotaType

class Unreliable:
    def quota_limit(self, quota_type, principal, client_id):
        if client_id.startswith("raiser"):
            raise RuntimeError("the billing service is down")
        if client_id.startswith("sleeper") and quota_type is ClientQuotaType.PRODUCE:
            time.sleep(6)
        if client_id == "canary" and quota_type is ClientQuotaType.PRODUCE:
            return 1.0
        return None
"""


def python_path(*extra: Path) -> dict[str, str]:
    paths = [str(path) for path in extra] + [os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(filter(None, paths))}


def throttle_ms(port: int, client_id: str, size: int = 100_000) -> int:
    """Produce one record of `size` bytes as `client_id`; the answer's throttle time."""
    batch = record_batch([(None, b"x" * size)], now_ms())
    response = produce(port, 9, "metered", {0: batch}, client_id=client_id)
    assert response.responses[0].partition_responses[0].error_code == 0
    return int(response.throttle_time_ms)


def create_metered_topic(broker: Any) -> None:
    """The topic, once its partition accepts records (its log is created after the answer)."""
    create_topic(broker.bootstrap, "metered")
    batch = record_batch([(None, b"first")], now_ms())

    def accepted() -> bool:
        response = produce(broker.port, 9, "metered", {0: batch}, client_id="setup")
        return response.responses[0].partition_responses[0].error_code == 0

    wait_until(accepted, "the topic accepts records")


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def test_a_plan_based_callback_changes_a_clients_rate_at_run_time(
    broker_factory: Any, tmp_path: Path
) -> None:
    plans = tmp_path / "plans.json"
    plans.write_text(json.dumps({"User:ANONYMOUS": "free"}))
    env = {**python_path(REPO / "examples"), "PLAN_QUOTA_FILE": str(plans)}
    broker = broker_factory(
        {**WINDOW, CALLBACK_KEY: "plan_quota_callback:PlanQuotaCallback"}, env=env
    )
    create_metered_topic(broker)
    # The free plan (50 kB/s) applies once the callback has answered for this client.
    wait_until(lambda: throttle_ms(broker.port, "app") > 0, "the free plan throttles")
    plans.write_text(json.dumps({"User:ANONYMOUS": "unlimited"}))
    wait_until(lambda: throttle_ms(broker.port, "app") == 0, "the new plan applies")


@pytest.mark.parametrize("failing_client", ["raiser-1", "sleeper"])
def test_a_failing_or_slow_callback_leaves_the_broker_serving_with_one_log_line(
    broker_factory: Any, tmp_path: Path, failing_client: str
) -> None:
    (tmp_path / "unreliable_quotas.py").write_text(UNRELIABLE)
    broker = broker_factory(
        {**WINDOW, CALLBACK_KEY: "unreliable_quotas:Unreliable"}, env=python_path(tmp_path)
    )
    create_metered_topic(broker)
    for client in (failing_client, "raiser-2"):
        assert throttle_ms(broker.port, client) == 0
    # The canary's quota is asked for after the failing clients': once it is throttled, their
    # calls have failed and been logged.
    wait_until(lambda: throttle_ms(broker.port, "canary") > 0, "the canary is throttled")
    failures = [
        line
        for line in broker.stderr_text().splitlines()
        if f"plugin {CALLBACK_KEY}: quota_limit" in line
    ]
    problem = "raised RuntimeError" if failing_client.startswith("raiser") else "took longer"
    assert len(failures) == 1 and problem in failures[0], failures
    if failing_client.startswith("raiser"):
        assert "the billing service is down" in broker.stderr_text()


def test_a_callback_that_cannot_be_loaded_stops_start_up_with_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            broker_command(),
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            f"{CALLBACK_KEY}=no_such_quota_module:Callback",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"krust-broker: configuration error: {CALLBACK_KEY}:")
    assert "no_such_quota_module" in lines[-1]
