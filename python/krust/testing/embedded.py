"""`krust.Broker`: a real krust broker for tests, in a child process on free loopback ports.

The broker never runs in the caller's interpreter: it is `krust-broker` run by the caller's
interpreter (`python -m krust.testing.embedded_child`), its data in a temporary directory
(unless one is given), its output in a log file beside it. A finalizer stops a forgotten broker
when it is garbage collected or when the interpreter exits; a caller killed outright is noticed
by the child, which stops and removes its directory. No broker outlives its test run.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

# What the child process runs: krust-broker under this interpreter (python -m).
CHILD_MODULE = "krust.testing.embedded_child"
HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
TOPIC_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 4000
READY_POLL_S = 0.01
PROBE_TIMEOUT_S = 1.0
# A free port is found by binding port 0 and closing it, so another process may take it before
# the broker binds it: then the broker exits at once and is started again on another port.
PORT_ATTEMPTS = 3
_PORT_TAKEN = "Address already in use"
# In a given data dir: the port it was served on (see Broker._remembered_port).
PORT_FILE = "krust-broker.port"
# The listeners of a broker: clients', and the controller quorum's (as in Kafka's single-node
# config/server.properties).
BROKER_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
# Kafka's file naming the cluster a log dir belongs to.
META_FILE = "meta.properties"
# The keys a Broker sets itself, and the argument that says what they should be.
OWNED_KEYS = {
    "listeners": "port",
    "controller.listener.names": "port",
    "log.dirs": "data_dir",
    "log.dir": "data_dir",
}


class BrokerError(RuntimeError):
    """The broker did not start or refused a request; the message ends with its log's tail."""


def config_value(value: object) -> str:
    """A Python value as Kafka's config text: booleans in lower case, sequences comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(config_value(item) for item in value)
    return str(value)


def broker_config(keywords: Mapping[str, object], config: Mapping[str, object]) -> dict[str, str]:
    """Kafka config keys from keywords (`num_partitions=3` is `num.partitions`) and a mapping."""
    keys = {name.replace("_", "."): value for name, value in keywords.items()}
    keys.update(config)
    for key, argument in OWNED_KEYS.items():
        if key in keys:
            raise ValueError(f"{key} is set by krust.Broker: use its {argument} argument")
    return {key: config_value(value) for key, value in keys.items()}


def port_is_free(port: int) -> bool:
    """Whether a broker could listen on `port` now. The probe binds as the broker's listener
    does (tokio sets SO_REUSEADDR, as Kafka's does): a port whose last connections linger in
    TIME_WAIT after a stop is free for it, one a process listens on is not."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def free_port(other_than: int = 0) -> int:
    """A port nothing listens on now, not `other_than`."""
    while True:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port != other_than:
            return port


class _Run:
    """One child broker process and its work directory (log file, and data unless given).

    Separate from Broker so that the finalizer holds no reference to the Broker itself."""

    def __init__(self, broker_args: list[str], workdir: Path) -> None:
        self.workdir = workdir
        self.log_path = workdir / "broker.log"
        self.final_log: str | None = None
        # The broker is configured by its arguments only, not by a KRUST_* variable the
        # developer happens to have set.
        env = {name: value for name, value in os.environ.items() if not name.startswith("KRUST_")}
        try:
            with self.log_path.open("wb") as log:
                # stdin: a pipe only this process holds; the child stops when it closes.
                self.process = subprocess.Popen(
                    [sys.executable, "-m", CHILD_MODULE, str(workdir), *broker_args],
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    def log(self) -> str:
        if self.final_log is not None:
            return self.final_log
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def close(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, SIGKILL if it has not exited within `timeout`, then remove the work dir."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.final_log = self.log()
            shutil.rmtree(self.workdir, ignore_errors=True)


class Broker:
    """A krust broker in a child process: `with krust.Broker(num_partitions=3) as broker:`.

    Kafka config keys are keywords with dots as underscores, or a `config` mapping for keys
    that are not identifiers. `port=0` picks a free port for clients; the controller listener
    (`controller_port`, for `--bootstrap-controller` tools) is always on a free port. Data
    lives in a temporary directory removed at stop, unless `data_dir` is given: then it is
    kept, and a later Broker on it serves it on the same port again.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int = 0,
        config: Mapping[str, object] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        **keywords: object,
    ) -> None:
        self.config = broker_config(keywords, config or {})
        self._given_data_dir = None if data_dir is None else Path(data_dir)
        self._requested_port = port
        self.start_timeout = start_timeout
        self._port = port
        self._controller_port = 0
        self._cluster_id = ""
        self._run: _Run | None = None
        self._finalizer: weakref.finalize[[], Broker] | None = None

    @property
    def running(self) -> bool:
        return self._run is not None and self._run.process.poll() is None

    @property
    def port(self) -> int:
        return self._port

    @property
    def controller_port(self) -> int:
        """The port of the controller listener (0 before the first start)."""
        return self._controller_port

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self._port}"

    @property
    def bootstrap_controllers(self) -> str:
        """The controller listener's address, for Kafka's `--bootstrap-controller` (KIP-919)."""
        return f"{HOST}:{self._controller_port}"

    @property
    def pid(self) -> int:
        if self._run is None:
            raise BrokerError("the broker was never started")
        return self._run.process.pid

    @property
    def data_dir(self) -> Path:
        """Where the broker keeps its data (a temporary directory unless one was given)."""
        if self._given_data_dir is not None:
            return self._given_data_dir
        if self._run is None:
            raise BrokerError("the broker was never started")
        return self._run.workdir / "data"

    @property
    def log(self) -> str:
        """Everything the broker printed (stdout and stderr) in its latest run."""
        return "" if self._run is None else self._run.log()

    def broker_args(self, port: int, controller_port: int, data_dir: Path) -> list[str]:
        """krust-broker's arguments for this broker on `port` (its controller listener on
        `controller_port`) with its data in `data_dir`."""
        listeners = (
            f"{BROKER_LISTENER}://{HOST}:{port},{CONTROLLER_LISTENER}://{HOST}:{controller_port}"
        )
        config = {
            "listeners": listeners,
            "controller.listener.names": CONTROLLER_LISTENER,
            "log.dirs": str(data_dir),
            "cluster.id": self._cluster_id,
            **self.config,
        }
        return [f"--override={key}={value}" for key, value in config.items()]

    def start(self) -> Broker:
        """Start the broker; return once it answers Metadata. Raises BrokerError (with the
        broker's log) if it exits first or does not answer within `start_timeout` seconds."""
        if self.running:
            raise BrokerError(f"the broker on {self.bootstrap_servers} is already running")
        self.stop()
        deadline = time.monotonic() + self.start_timeout
        fixed_port = self._requested_port or self._remembered_port()
        if fixed_port and not port_is_free(fixed_port):
            raise BrokerError(f"cannot start a broker on port {fixed_port}: it is in use")
        self._cluster_id = self._choose_cluster_id()
        for _ in range(PORT_ATTEMPTS):
            self._port = fixed_port or free_port()
            self._controller_port = free_port(other_than=self._port)
            workdir = Path(tempfile.mkdtemp(prefix="krust-broker-"))
            data_dir = self._given_data_dir or workdir / "data"
            args = self.broker_args(self._port, self._controller_port, data_dir)
            self._run = _Run(args, workdir)
            self._finalizer = weakref.finalize(self, self._run.close)
            try:
                ready = self._wait_ready(deadline, may_move=not fixed_port)
            except BaseException:  # KeyboardInterrupt too: no broker is left half started
                self.stop()
                raise
            if ready:
                self._remember_port()
                return self
        raise self._failure(f"found no free port in {PORT_ATTEMPTS} attempts")

    def _choose_cluster_id(self) -> str:
        """The cluster id the broker will have: the one configured, else the one its data dir
        was formatted with, else a new one. Readiness checks it, so that another broker that
        took the port in the meantime is not mistaken for this one."""
        configured = self.config.get("cluster.id")
        if configured is not None:
            return configured
        meta_path = None if self._given_data_dir is None else self._given_data_dir / META_FILE
        if meta_path is None or not meta_path.exists():
            return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        formatted = re.search(r"^cluster\.id=(\S+)", meta_path.read_text(), re.MULTILINE)
        if formatted is None:
            raise BrokerError(f"{meta_path} has no cluster.id")
        return formatted[1]

    def _remembered_port(self) -> int:
        """The port a given data dir was last served on, else 0: its clients (and the
        addresses they stored) find it where it was."""
        if self._given_data_dir is None:
            return 0
        try:
            return int((self._given_data_dir / PORT_FILE).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def _remember_port(self) -> None:
        if self._given_data_dir is not None:
            (self._given_data_dir / PORT_FILE).write_text(str(self._port))

    def _wait_ready(self, deadline: float, may_move: bool) -> bool:
        """True once ready; False if another process took the port and `may_move` (then the
        caller tries another port)."""
        # Imported here so the import overlaps the child's start-up.
        from krust.testing.embedded_requests import metadata_answers

        assert self._run is not None
        while True:
            status = self._run.process.poll()
            if status is not None:
                if may_move and _PORT_TAKEN in self._run.log():
                    self.stop()
                    return False
                raise self._failure(f"exited with status {status} before it was ready")
            if metadata_answers((HOST, self._port), self._cluster_id, PROBE_TIMEOUT_S):
                return True
            if time.monotonic() > deadline:
                raise self._failure(f"did not answer Metadata within {self.start_timeout} s")
            time.sleep(READY_POLL_S)

    def _failure(self, what: str) -> BrokerError:
        """Stop the broker; the error to raise, with the tail of its log."""
        self.stop()
        tail = self.log[-LOG_TAIL_CHARS:]
        return BrokerError(f"krust broker on {self.bootstrap_servers} {what}; its log:\n{tail}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, SIGKILL after `timeout` seconds; the temporary directory is removed.
        Does nothing if the broker is not running."""
        if self._run is not None and self._finalizer is not None and self._finalizer.alive:
            self._run.close(timeout)
            self._finalizer.detach()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        timeout: float = TOPIC_TIMEOUT_S,
    ) -> str:
        """Create a topic (CreateTopics) and return its name once every partition has a
        leader. Raises BrokerError with Kafka's error (TOPIC_ALREADY_EXISTS, INVALID_CONFIG...)."""
        from krust.testing.embedded_requests import RequestError, create_topic

        if self._run is None or not self.running:
            status = "never started" if self._run is None else "not running"
            raise BrokerError(f"the broker is {status}; its log:\n{self.log[-LOG_TAIL_CHARS:]}")
        configs = {key: config_value(value) for key, value in (config or {}).items()}
        try:
            create_topic((HOST, self._port), name, partitions, replication_factor, configs, timeout)
        except RequestError as error:
            raise BrokerError(str(error)) from None
        except OSError as error:  # the broker closed the connection: it may be dying
            tail = self.log[-LOG_TAIL_CHARS:]
            raise BrokerError(
                f"CreateTopics {name!r}: {error}; the broker's log:\n{tail}"
            ) from None
        return name

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<krust.Broker {self.bootstrap_servers} {state}>"
