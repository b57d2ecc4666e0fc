"""What the core routes to Python: who may call an api (`Exposure`), and the gate that holds
the core's Python-owned requests until the services' dispatcher takes them.

Imported before the port opens, so it imports neither asyncio nor kio: on a node that needs
nothing of Python before it listens, the dispatcher and its event loop are built after the
port opens (docs/python-services.md, "Start-up order")."""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable
from typing import Any


class Exposure(enum.Enum):
    """Who may call an api (docs/session-and-routing.md)."""

    CLIENTS = "clients"  # clients on the broker listeners, and the core itself
    INTERNAL = "internal"  # the core itself only, never advertised
    # Controller apis (Kafka's listeners=["controller"]): the controller listeners, and the
    # core itself on a node that is a quorum of one.
    CONTROLLER = "controller"
    # Admin apis the active controller decides (Kafka's forwardable ones): the controller
    # listeners, and the broker listeners, which forward them to the active controller when
    # the node is in a quorum of several voters (KIP-590).
    FORWARDED = "forwarded"


CoreRoutes = dict[int, tuple[int, int, str]]
"""What `krust._core.Core.serve` routes to Python: (min, max version, exposure) by api key."""


class RequestGate:
    """The core's bridge handler: holds requests until `open` names where they go, then
    passes them on in the order they came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[Any] = []
        self._submit: Callable[[Any], None] | None = None

    def submit(self, request: Any) -> None:
        """Called on the core's bridge thread."""
        with self._lock:
            if self._submit is None:
                self._held.append(request)
                return
        self._submit(request)

    def open(self, submit: Callable[[Any], None]) -> None:
        """Pass on what is held, then every request as it comes. `submit` must not block."""
        with self._lock:
            for request in self._held:
                submit(request)
            self._held = []
            self._submit = submit

    def close(self) -> None:
        """Close the connections of requests still held (the services never started)."""
        with self._lock:
            held, self._held = self._held, []
        for request in held:
            with contextlib.suppress(Exception):  # the connection is gone already
                request.close_connection()
