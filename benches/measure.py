"""Resource use of a broker's process tree, read from /proc (Linux only)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def process_tree(pid: int) -> list[int]:
    """`pid` and all its live descendants (a console script may start helpers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children.get(current, []))
    return tree


def rss_bytes(pid: int) -> int:
    """Resident set size of the whole process tree."""
    total = 0
    for member in process_tree(pid):
        try:
            resident_pages = int(Path(f"/proc/{member}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident_pages * _PAGE_SIZE
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time consumed so far by the process tree."""
    ticks = 0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command name: field 12 is utime, 13 is stime (proc(5), 0-based here).
        ticks += int(fields[11]) + int(fields[12])
    return ticks / _CLOCK_TICKS


@dataclass
class PeakRssSampler:
    """Samples a process tree's RSS in the background and keeps the peak."""

    pid: int
    interval_s: float = 0.1
    peak_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PeakRssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, rss_bytes(self.pid))
            self._stop.wait(self.interval_s)
