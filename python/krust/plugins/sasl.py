"""The SASL/PLAIN server callback: a Python class that decides whether a username and password
are valid, configured per listener as Kafka's
`listener.name.<listener>.plain.sasl.server.callback.handler.class` (docs/security.md)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class PlainServerCallback(Protocol):
    """Kafka's PlainServerCallbackHandler: `authenticate` answers whether `password` is the
    password of `username`. It runs on the plugin's own thread; an exception or a call slower
    than the broker's timeout refuses the connection (one log line with the traceback)."""

    def authenticate(self, username: str, password: str) -> bool: ...
