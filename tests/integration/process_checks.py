"""Whether a process still runs, for tests that check nothing is left behind."""

from __future__ import annotations

from pathlib import Path


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, exited but not yet reaped, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
