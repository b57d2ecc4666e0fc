"""Java programs' main methods run in a long-lived JVM (tests/java/src/MainServer.java) instead
of one `java` process per call: a JVM start with Kafka's jars costs a second or more of the two
shared cores, and the suite runs Kafka's tools and the Java client hundreds of times.

One server per classpath, started on first use and stopped when the test process exits; a call
while every server of its classpath is busy (a test calling from several threads) starts another.
A call that outlives its timeout kills its server, as `subprocess.run` kills its process.
"""

from __future__ import annotations

import atexit
import struct
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

JAVA_DIR = Path(__file__).resolve().parents[1] / "java"
SERVER_CLASSES = JAVA_DIR / "build" / "server-classes"
SERVER_MAIN = "MainServer"
# C1 only, as the per-call JVMs had: the calls are short. A small heap and the serial collector:
# up to four of these live for the whole session beside the brokers.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-Xmx512m", "-XX:+UseSerialGC")


@dataclass(frozen=True)
class MainRun:
    returncode: int
    stdout: str
    stderr: str


def _pack(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


class _Server:
    def __init__(self, classpath: str) -> None:
        self.process = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", f"{SERVER_CLASSES}:{classpath}", SERVER_MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.answer: list[bytes] | None = None

    def _read_exactly(self, size: int) -> bytes:
        assert self.process.stdout is not None
        data = self.process.stdout.read(size)
        if len(data) != size:
            raise EOFError("the Java main server exited")
        return data

    def _read_answer(self) -> None:
        try:
            fields = []
            for _ in range(3):
                (size,) = struct.unpack(">i", self._read_exactly(4))
                fields.append(self._read_exactly(size))
            self.answer = fields
        except (EOFError, OSError, ValueError):
            self.answer = None

    def call(self, main_class: str, args: tuple[str, ...], stdin: str, timeout_s: float) -> MainRun:
        assert self.process.stdin is not None
        request = _pack(main_class.encode()) + struct.pack(">i", len(args))
        request += b"".join(_pack(arg.encode()) for arg in args) + _pack(stdin.encode())
        self.process.stdin.write(request)
        self.process.stdin.flush()
        self.answer = None
        reader = threading.Thread(target=self._read_answer, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            self.stop()
            raise subprocess.TimeoutExpired([main_class, *args], timeout_s)
        if self.answer is None:
            raise RuntimeError(f"the Java main server exited during {main_class} {args}")
        status, stdout, stderr = self.answer
        return MainRun(
            int(status), stdout.decode(errors="replace"), stderr.decode(errors="replace")
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()


_lock = threading.Lock()
_idle: dict[str, list[_Server]] = {}
_all: list[_Server] = []


def _take(classpath: str) -> _Server:
    with _lock:
        idle = _idle.setdefault(classpath, [])
        while idle:
            server = idle.pop()
            if server.alive():
                return server
        server = _Server(classpath)
        _all.append(server)
        return server


def _give_back(classpath: str, server: _Server) -> None:
    with _lock:
        if server.alive():
            _idle[classpath].append(server)


def run_main(
    classpath: str, main_class: str, *args: str, stdin: str = "", timeout_s: float
) -> MainRun:
    """`java -cp classpath main_class args...`, in a server JVM; exit status and output."""
    server = _take(classpath)
    try:
        return server.call(main_class, args, stdin, timeout_s)
    finally:
        _give_back(classpath, server)


@atexit.register
def stop_servers() -> None:
    with _lock:
        for server in _all:
            server.stop()
        _all.clear()
        _idle.clear()
