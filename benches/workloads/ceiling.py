"""The machine's physical ceiling, measured in the same run as the brokers.

Raw loopback TCP into a plain socket sink, and sequential writes into the page cache of
the disk that holds the brokers' data (no fsync, like the brokers).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
from pathlib import Path

_CHUNK = 1024 * 1024


def _sink(listener: socket.socket) -> None:
    connection, _ = listener.accept()
    buffer = bytearray(_CHUNK)
    with connection:
        while connection.recv_into(buffer):
            pass


def loopback_tcp_mb_per_s(total_bytes: int) -> float:
    """Stream `total_bytes` over 127.0.0.1 to a sink in another process."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        sink = multiprocessing.get_context("fork").Process(target=_sink, args=(listener,))
        sink.start()
        chunk = bytes(_CHUNK)
        with socket.create_connection(listener.getsockname()) as sender:
            started = time.monotonic()
            for _ in range(total_bytes // _CHUNK):
                sender.sendall(chunk)
            sender.shutdown(socket.SHUT_WR)
            sink.join()
            seconds = time.monotonic() - started
    return total_bytes / seconds / 1e6


def page_cache_write_mb_per_s(directory: Path, total_bytes: int) -> float:
    """Sequential 1 MiB writes to a new file in `directory`, without fsync."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "ceiling.bin"
    chunk = os.urandom(_CHUNK)
    started = time.monotonic()
    with target.open("wb", buffering=0) as file:
        for _ in range(total_bytes // _CHUNK):
            file.write(chunk)
    seconds = time.monotonic() - started
    target.unlink()
    return total_bytes / seconds / 1e6
