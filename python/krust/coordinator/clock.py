"""Time for the coordinator: a clock with scheduled callbacks (asyncio's; tests inject a fake).

The coordinator never sleeps or reads the system time itself; every timeout (session, rebalance,
initial delay, pending sync, offset expiry) is a callback scheduled here, so a test can move time
forward by hand and see exactly what a real broker would do, without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (commit and state timestamps are stored)."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run `callback` once, `delay_ms` from now, unless cancelled first."""


class AsyncioClock:
    """The real clock: system time, timers on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self._loop.call_later(max(delay_ms, 0) / 1000, callback)


class KeyedTimer:
    """At most one pending callback per key: scheduling a key again replaces its callback.

    Kafka's coordinator keys its timeouts the same way (heartbeat per member, join and sync per
    group), which makes "reset the session timer" a plain reschedule.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: dict[Hashable, Cancellable] = {}

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        self.cancel(key)

        def fire() -> None:
            del self._pending[key]
            callback()

        self._pending[key] = self._clock.call_later(delay_ms, fire)

    def cancel(self, key: Hashable) -> None:
        handle = self._pending.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._pending

    def cancel_all(self) -> None:
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
