"""A quota callback that gives each principal the byte rates of its billing plan.

The plan of each principal comes from a JSON file your billing system writes, for example
`{"User:alice": "pro", "User:ANONYMOUS": "free"}`; principals it does not name get the free plan.
The file is re-read when it changes, and the broker applies new plans without a restart.

    PLAN_QUOTA_FILE=/etc/krust/plans.json PYTHONPATH=examples krust-broker \\
        --override client.quota.callback.class=plan_quota_callback:PlanQuotaCallback
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from krust.plugins import ClientQuotaType, QuotaCallbackContext


@dataclass(frozen=True)
class Plan:
    producer_byte_rate: float | None  # None: unlimited
    consumer_byte_rate: float | None


PLANS = {
    "free": Plan(producer_byte_rate=50_000, consumer_byte_rate=100_000),
    "pro": Plan(producer_byte_rate=5_000_000, consumer_byte_rate=10_000_000),
    "unlimited": Plan(producer_byte_rate=None, consumer_byte_rate=None),
}
DEFAULT_PLAN = "free"
CHECK_EVERY_S = 0.5


class PlanQuotaCallback:
    def __init__(self) -> None:
        self._path = Path(os.environ.get("PLAN_QUOTA_FILE", "plans.json"))
        self._plans: Mapping[str, str] = {}
        self._stopped = threading.Event()

    def configure(self, configs: Mapping[str, str]) -> None:
        self._plans = self._read()

    def start(self, context: QuotaCallbackContext) -> None:
        threading.Thread(target=self._watch, args=(context,), daemon=True).start()

    def quota_limit(
        self, quota_type: ClientQuotaType, principal: str, client_id: str
    ) -> float | None:
        plan = PLANS.get(self._plans.get(principal, DEFAULT_PLAN), PLANS[DEFAULT_PLAN])
        if quota_type is ClientQuotaType.PRODUCE:
            return plan.producer_byte_rate
        if quota_type is ClientQuotaType.FETCH:
            return plan.consumer_byte_rate
        return None

    def close(self) -> None:
        self._stopped.set()

    def _read(self) -> Mapping[str, str]:
        try:
            return dict(json.loads(self._path.read_text()))
        except FileNotFoundError:
            return {}

    def _watch(self, context: QuotaCallbackContext) -> None:
        """Re-read the plans when the file changes, and have the broker ask again."""
        last = self._mtime()
        while not self._stopped.wait(CHECK_EVERY_S):
            mtime = self._mtime()
            if mtime != last:
                last = mtime
                self._plans = self._read()
                context.reset_quotas()

    def _mtime(self) -> float | None:
        try:
            return self._path.stat().st_mtime
        except FileNotFoundError:
            return None
