"""`ClientQuotaCallback`: a plugin that decides each client's quotas, modelled on Kafka's
`org.apache.kafka.server.quota.ClientQuotaCallback` (KIP-257). See docs/plugins.md."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from krust.plugins.lifecycle import Plugin, PluginContext


class ClientQuotaType(enum.Enum):
    """Kafka's ClientQuotaType, named by the quota key each stands for."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"


@dataclass(frozen=True)
class QuotaCallbackContext(PluginContext):
    """What a quota callback gets at `start`: the broker's identity, and `reset_quotas`, to
    call (from any thread) when the quotas it answers have changed; the broker then asks it
    again about every client (Kafka's quotaResetRequired)."""

    reset_quotas: Callable[[], None]


@runtime_checkable
class ClientQuotaCallback(Plugin, Protocol):
    """Maps a client to its quotas. `quota_limit` is asked once per quota type for each new
    (principal, client id) the broker sees, and again after `reset_quotas`; never on the
    produce/fetch path (the broker keeps the answers in Rust). None means unlimited; a value
    is in the quota's unit: bytes per second, or a percentage for REQUEST."""

    def quota_limit(
        self, quota_type: ClientQuotaType, principal: str, client_id: str
    ) -> float | None: ...
