"""Calling a plugin without letting it stall or crash the broker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class PluginRunner:
    """Runs one plugin's calls, one at a time, on the plugin's own thread (plugins need not be
    thread-safe, and a slow one never blocks the event loop or a tokio worker).

    A call that raises or takes longer than `timeout_s` returns the caller's fallback (for an
    authorizer: deny). The first failure of each kind is logged with the plugin's traceback;
    repeats are counted, not logged again, so a broken plugin cannot flood the log."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"plugin-{name}")
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self.failures = 0

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T]:
        return self._executor.submit(fn, *args)

    def call(self, what: str, fallback: T, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on the plugin's thread; `fallback` if it raises or times out."""
        future = self.submit(fn, *args)
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            self._failed(what, f"took longer than {self.timeout_s:g} s", None)
        except Exception as error:
            self._failed(what, f"raised {type(error).__name__}: {error}", error)
        return fallback

    def _failed(self, what: str, problem: str, error: BaseException | None) -> None:
        with self._lock:
            self.failures += 1
            first = what not in self._logged
            self._logged.add(what)
        if first:
            log.error(
                "plugin %s: %s %s; the broker goes on without its answer "
                "(later failures of %s are not logged)",
                self.name,
                what,
                problem,
                what,
                exc_info=error,
            )

    def close(self, close: Callable[[], object] | None = None) -> None:
        """Run the plugin's own `close` (if given) on its thread, then stop the thread."""
        if close is not None:
            self.call("close", None, close)
        self._executor.shutdown(wait=False, cancel_futures=True)
