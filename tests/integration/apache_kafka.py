"""Apache Kafka itself (KRaft, broker and controller in one JVM, from the kafka_2.13 jars in
tests/java/build/tools-libs), for the tests that check krust's clients work against any Kafka
broker, not only krust."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .broker_process import HOST, READY_TIMEOUT_S, STDERR_TAIL_CHARS, free_port
from .kafka_cli import TOOLS_CLASSPATH
from .wire import ConnectionClosedError, metadata_broker_ports

STOP_TIMEOUT_S = 30.0
# Kafka's start-up is slower than krust's: a JVM, then the KRaft controller.
KAFKA_READY_TIMEOUT_S = 6 * READY_TIMEOUT_S
LOG4J2 = """\
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


@dataclass(frozen=True)
class ApacheKafka:
    bootstrap: str


def _java(workdir: Path, main_class: str, *args: str) -> list[str]:
    return [
        "java",
        "-Xmx512m",
        f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
        "-cp",
        TOOLS_CLASSPATH,
        main_class,
        *args,
    ]


def apache_kafka(workdir: Path) -> Iterator[ApacheKafka]:
    """Format a data directory, run Kafka until the caller is done, stop it."""
    port, controller_port = free_port(), free_port()
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(workdir / "data"),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    config = workdir / "server.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    (workdir / "log4j2.properties").write_text(LOG4J2)
    cluster_id = "-"
    while cluster_id.startswith("-"):  # kafka-storage would read it as an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    subprocess.run(
        _java(workdir, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
        check=True,
        capture_output=True,
    )
    stderr_path = workdir / "kafka.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            _java(workdir, "kafka.Kafka", str(config)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        _wait_ready(process, port, stderr_path)
        yield ApacheKafka(f"{HOST}:{port}")
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], port: int, stderr_path: Path) -> None:
    deadline = time.monotonic() + KAFKA_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if port in metadata_broker_ports(HOST, port, timeout=1.0):
                return
        except (OSError, ConnectionClosedError, AssertionError):
            pass  # not listening yet
        time.sleep(0.2)
    tail = stderr_path.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
    pytest.fail(f"Apache Kafka did not start (exit {process.poll()}); its stderr:\n{tail}")
