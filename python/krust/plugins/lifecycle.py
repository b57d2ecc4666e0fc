"""The life cycle every plugin follows: configure, start, close."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class PluginContext:
    """What a plugin learns about the broker when it starts (Kafka's AuthorizerServerInfo)."""

    cluster_id: str
    node_id: int


@runtime_checkable
class Plugin(Protocol):
    """The life cycle: `configure` once with the broker's configs (the plugin's own keys
    included), `start` once the broker knows its cluster, `close` at shutdown. All three run on
    the plugin's own thread, never on the broker's event loop."""

    def configure(self, configs: Mapping[str, str]) -> None: ...

    def start(self, context: PluginContext) -> None: ...

    def close(self) -> None: ...
