"""A fake coordinator clock: time moves only when a test says so (krust.coordinator.clock.Clock)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from krust.coordinator.clock import Cancellable


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
