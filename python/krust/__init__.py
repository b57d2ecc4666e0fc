"""krust: a broker that speaks the Apache Kafka wire protocol (Rust hot path, Python decisions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

# The version lives in Cargo.toml (the wheel takes it from there too). Reading it from the
# extension instead of importlib.metadata saves ~50 ms of start-up.
try:
    from krust._core import __version__
except ImportError:  # a source tree whose extension was never built
    __version__ = "0+source"

if TYPE_CHECKING:
    from krust.testing.embedded import Broker, BrokerError
    from krust.testing.embedded_async import AsyncBroker

__all__ = ["AsyncBroker", "Broker", "BrokerError", "__version__"]

# The embedded broker's API is imported on first use (PEP 562), so that the broker process,
# which imports this package too, does not pay for it at start-up.
_LAZY = {
    "Broker": "krust.testing.embedded",
    "BrokerError": "krust.testing.embedded",
    "AsyncBroker": "krust.testing.embedded_async",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'krust' has no attribute {name!r}")
