"""Time for the coordinator: a clock with scheduled callbacks, real (asyncio) or fake (tests).

The coordinator never sleeps or reads the system time itself; every timeout (session, rebalance,
initial delay, pending sync, offset expiry) is a callback scheduled here, so a test can move time
forward by hand and see exactly what a real broker would do, without waiting.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
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


@dataclass(order=True)
class _FakeTimer:
    due_ms: int
    sequence: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to; due callbacks run in time order inside `advance`."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._timers: list[_FakeTimer] = []
        self._sequence = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        timer = _FakeTimer(self._now_ms + max(delay_ms, 0), next(self._sequence), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, delta_ms: int) -> None:
        """Move time forward, running every callback that falls due, each at its own due time."""
        target = self._now_ms + delta_ms
        while self._timers and self._timers[0].due_ms <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now_ms = timer.due_ms
            timer.callback()
        self._now_ms = target

    def pending_timers(self) -> int:
        return sum(1 for timer in self._timers if not timer.cancelled)


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
