"""The child side of `krust.Broker`: `python -m krust.testing.embedded_child WORKDIR [BROKER ARGS]`.

Runs `krust-broker` with BROKER ARGS, and reads stdin: a pipe whose other end only the parent
holds and never writes to. End of file there means the parent is gone without stopping the
broker (SIGKILL, a crash, os._exit): the broker then shuts down as on SIGTERM, and WORKDIR
(the temporary directory the parent made for it) is removed, so nothing outlives the parent.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from krust.runtime import cli

# After the parent is gone: how long a clean shutdown may take before the process ends anyway.
ORPHAN_STOP_TIMEOUT_S = 10.0
WATCH_THREAD = "krust-parent-watch"
ORPHANED_EXIT = 1


def main(argv: Sequence[str]) -> int:
    workdir, broker_args = argv[0], list(argv[1:])
    orphaned, finished = threading.Event(), threading.Event()

    def watch_parent() -> None:
        while os.read(sys.stdin.fileno(), 4096):
            pass
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)
        if not finished.wait(ORPHAN_STOP_TIMEOUT_S):
            shutil.rmtree(workdir, ignore_errors=True)
            os._exit(ORPHANED_EXIT)

    # Until the broker serves (and installs its own handler), SIGTERM ends start-up through
    # cli.main's KeyboardInterrupt path instead of killing the process before the clean-up.
    signal.signal(signal.SIGTERM, _interrupt)
    threading.Thread(target=watch_parent, name=WATCH_THREAD, daemon=True).start()
    try:
        return cli.main(broker_args)
    except KeyboardInterrupt:
        return cli.EXIT_OK
    finally:
        finished.set()
        if orphaned.is_set():
            shutil.rmtree(workdir, ignore_errors=True)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
