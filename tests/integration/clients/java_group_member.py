"""A Java consumer in a group (KrustJavaClient's `group-member`), in its own JVM, with the
snapshot interface of groups_support.GroupMember: `assignment`, `delivered`, `numbers()`."""

from __future__ import annotations

import subprocess
import threading

from ..groups_support import Delivered
from .java import CLASSPATH, MAIN_CLASS

CLOSE_TIMEOUT_S = 60.0


class JavaGroupMember:
    library = "java"

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        protocol: str = "consumer",
        assignor: str | None = None,
    ) -> None:
        self.group = group
        self.topic = topic
        self.assignment: frozenset[int] = frozenset()
        self.delivered: list[Delivered] = []
        self._errors: list[str] = []
        command = [
            "java",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            CLASSPATH,
            MAIN_CLASS,
            "group-member",
            bootstrap,
            topic,
            group,
            protocol,
            *([assignor] if assignor else []),
        ]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._stderr = threading.Thread(target=self._read_errors, daemon=True)

    def __repr__(self) -> str:
        return f"<java member of {self.group}: {sorted(self.assignment)}>"

    def start(self) -> JavaGroupMember:
        self._reader.start()
        self._stderr.start()
        return self

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "assigned":
                self.assignment = frozenset(int(p) for p in rest.split(",") if p)
            elif kind == "record":
                partition, offset, value = rest.split(" ")
                self.delivered.append(
                    Delivered(int(partition), int(offset), int(bytes.fromhex(value)))
                )

    def _read_errors(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            if line.startswith("error:"):
                self._errors.append(line.strip())

    def numbers(self) -> list[int]:
        return [d.number for d in self.delivered]

    def check(self) -> None:
        if self._errors:
            raise AssertionError(f"java member failed: {self._errors}")

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Close as the application would: commit, leave the group, exit."""
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout_s)
        self._reader.join(timeout_s)
        self.check()
        assert self._process.returncode == 0, f"java member exited {self._process.returncode}"

    def kill(self) -> None:
        """Die without leaving: the broker must notice at the session timeout."""
        self._process.kill()
        self._process.wait(CLOSE_TIMEOUT_S)
