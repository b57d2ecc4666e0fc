"""A real `krust-broker` process on a free loopback port, as the integration tests drive it."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from .ports import free_port
from .wire import ConnectionClosedError, metadata_broker_ports

HOST = "127.0.0.1"
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
STDERR_TAIL_CHARS = 4000


def broker_command() -> str:
    command = shutil.which("krust-broker")
    if command is None:
        pytest.fail("krust-broker is not on PATH: run `bash scripts/install-test-deps.sh`")
    return command


def broker_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The test's environment without any KRUST_* a developer may have set, plus `extra`."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("KRUST_")}
    env.update(extra)
    return env


class BrokerProcess:
    """One krust-broker: started, stopped, killed and restarted on the same port and data dir."""

    def __init__(
        self,
        workdir: Path,
        overrides: Mapping[str, str | None] | None = None,
        env: Mapping[str, str] | None = None,
        config_file: Path | None = None,
        open_file_limit: int | None = None,
        executable: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.executable = executable
        self.open_file_limit = open_file_limit
        self.port = free_port()
        # An override of None leaves that key to the broker's default (log.dirs: ./krust-data).
        chosen = {
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(workdir / "data"),
            **(overrides or {}),
        }
        self.overrides = {name: value for name, value in chosen.items() if value is not None}
        self.data_dir = Path(self.overrides.get("log.dirs", workdir / "krust-data"))
        self.env = broker_environment(env or {})
        self.config_file = config_file
        self.runs = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._exit_requested = False

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self._process is not None, "broker not started"
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _output_path(self, stream: str) -> Path:
        return self.workdir / f"{stream}-{self.runs}.log"

    def stdout_text(self) -> str:
        return self._output_path("stdout").read_text(errors="replace")

    def stderr_text(self) -> str:
        return self._output_path("stderr").read_text(errors="replace")

    def command(self) -> list[str]:
        command = [self.executable or broker_command()]
        if self.config_file is not None:
            command += ["--config", str(self.config_file)]
        for name, value in self.overrides.items():
            command += ["--override", f"{name}={value}"]
        return command

    def start(self) -> BrokerProcess:
        assert not self.running, "broker already running"
        self.runs += 1
        self._exit_requested = False
        with (
            self._output_path("stdout").open("wb") as stdout,
            self._output_path("stderr").open("wb") as stderr,
        ):
            self._process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                preexec_fn=self._limit_open_files if self.open_file_limit else None,
            )
        self.wait_ready()
        return self

    def _limit_open_files(self) -> None:
        """In the child: a hard limit too, so the broker cannot raise it."""
        assert self.open_file_limit is not None
        limit = (self.open_file_limit, self.open_file_limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)

    def _fail(self, what: str) -> None:
        pytest.fail(f"krust-broker {what}; its stderr:\n{self.stderr_text()[-STDERR_TAIL_CHARS:]}")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the broker answers Metadata listing itself; fail if it dies or stalls."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._fail(f"exited with {self._process.returncode} before it was ready")
            try:
                if self.port in metadata_broker_ports(HOST, self.port, timeout=1.0):
                    return
            except (OSError, ConnectionClosedError, AssertionError, struct.error):
                pass  # not listening yet, or not answering properly yet
            time.sleep(0.1)
        self.kill9()
        self._fail(f"did not answer a Metadata request within {timeout_s:.0f} s")

    def startup_line(self, timeout_s: float = 5.0) -> str:
        """The first line the broker printed on stdout in its latest run."""
        deadline = time.monotonic() + timeout_s
        while "\n" not in (text := self.stdout_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return text.split("\n", 1)[0]

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> float:
        """SIGTERM; assert a clean exit 0 within `timeout_s`. Returns how long it took."""
        assert self._process is not None and self.running, "broker not running"
        started = time.monotonic()
        self._exit_requested = True
        self._process.send_signal(signal.SIGTERM)
        try:
            returncode = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            self._fail(f"did not exit within {timeout_s:.0f} s of SIGTERM")
        if returncode != 0:
            self._fail(f"exited with {returncode} after SIGTERM (expected 0)")
        return time.monotonic() - started

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the broker to exit by itself (an expected exit); returns its status."""
        assert self._process is not None, "broker not started"
        self._exit_requested = True
        return self._process.wait(timeout=timeout_s)

    def kill9(self) -> None:
        self._exit_requested = True
        if self.running:
            assert self._process is not None
            self._process.kill()
            self._process.wait(timeout=STOP_TIMEOUT_S)

    def unexpected_exit(self) -> str | None:
        """Why the broker is gone if it exited without being stopped or killed, else None."""
        if self._process is None or self.running or self._exit_requested:
            return None
        return (
            f"krust-broker on port {self.port} exited by itself with {self._process.returncode}; "
            f"its stderr:\n{self.stderr_text()[-STDERR_TAIL_CHARS:]}"
        )

    def restart(self) -> BrokerProcess:
        """Start again on the same port with the same data dir and settings."""
        return self.start()


def shared_broker(
    workdir: Path, overrides: Mapping[str, str | None] | None = None
) -> Iterator[BrokerProcess]:
    """A broker for a fixture wider than one test: a crash fails the run, and it is killed at
    teardown whatever happened."""
    broker = BrokerProcess(workdir, overrides)
    try:
        yield broker.start()
        crash = broker.unexpected_exit()
        if crash:
            pytest.fail(crash)
    finally:
        broker.kill9()
