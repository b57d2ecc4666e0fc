"""Start and stop the two brokers under test with equivalent settings.

Both get: one node on loopback, the same log.segment.bytes and default partition count,
Kafka's default of no per-message fsync (log.flush.interval.messages unset), data dirs
under the same work directory (same disk). Kafka runs with the heap its start script
uses by default (-Xmx1g -Xms1g).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from integration.cluster import (
    HOST,
    Node,
    free_port,
    new_cluster_id,
    server_properties,
    write_properties,
)
from probe import wait_for_metadata

START_DEADLINE_S = 120.0
# Kafka's kafka-run-class.sh / kafka-server-start.sh defaults.
KAFKA_JVM_OPTS = [
    "-Xmx1g",
    "-Xms1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# The group coordinator's settings, the same on both brokers. No initial rebalance delay (the
# group workloads time their own joins); KIP-848 members heartbeat every second, as the
# rebalance workload's classic members do (workloads/rebalance.py); session timeouts are
# Kafka's defaults, written out so both brokers are seen to get them.
GROUP_COORDINATOR = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
}
_LOG4J2_QUIET = """\
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
"""


@dataclass(frozen=True)
class BrokerSettings:
    """What both brokers share for one benchmark session."""

    data_root: Path
    segment_bytes: int
    default_partitions: int = 1
    # How often both brokers look for segments to delete and logs to clean (Kafka's defaults,
    # 5 min and 15 s, would leave the background-work workload's window idle).
    retention_check_interval_ms: int = 1000
    cleaner_backoff_ms: int = 1000
    # The PEM keystore (unencrypted key + certificate) of both brokers' SSL listener, and the
    # CA clients trust (workloads/tls.py); None: no SSL listener.
    tls_keystore: Path | None = None
    tls_ca: Path | None = None


@dataclass
class BrokerProcess:
    """Shared process handling: start, time to first Metadata, SIGTERM, kill -9."""

    settings: BrokerSettings
    name: str = ""
    port: int = field(default_factory=free_port)
    # The SSL listener's port (used when settings.tls_keystore is set).
    tls_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def tls_bootstrap(self) -> str:
        return f"{HOST}:{self.tls_port}"

    @property
    def data_dir(self) -> Path:
        return self.settings.data_root / self.name / "data"

    @property
    def pid(self) -> int:
        assert self.process is not None, "broker not started"
        return self.process.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time set-up before the first start (formatting storage and the like)."""

    def reset(self) -> None:
        """Remove all data so the next start is on an empty broker."""
        shutil.rmtree(self.settings.data_root / self.name, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        self.prepare()
        # Write back what earlier sessions left dirty (gigabytes in full mode), so that the
        # start-up about to be timed does not wait behind it in the disk's queue.
        os.sync()

    def start(self) -> float:
        """Start the broker; return seconds until it first answered Metadata."""
        log_path = self.settings.data_root / self.name / "broker.log"
        with log_path.open("ab") as log:
            started = time.monotonic()
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=log, stdin=subprocess.DEVNULL
            )
        try:
            ready = wait_for_metadata(HOST, self.port, START_DEADLINE_S)
        except TimeoutError:
            self.kill()
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.name} did not start; log tail:\n{tail}") from None
        return ready - started

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def kill(self) -> None:
        """kill -9: the next start has to recover its logs."""
        if self.process is None:
            return
        self.process.kill()
        self.process.wait()
        self.process = None


@dataclass
class KafkaBroker(BrokerProcess):
    """Apache Kafka in KRaft combined mode (broker + controller in one JVM)."""

    libs_dir: Path = Path()
    name: str = "kafka"
    controller_port: int = field(default_factory=free_port)

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")

    def _write_config(self) -> Path:
        home = self.settings.data_root / self.name
        node = Node(1, self.port, self.controller_port, home)
        properties = server_properties(node, [node])
        keystore = self.settings.tls_keystore
        if keystore:
            tls = f",SSL://{HOST}:{self.tls_port}"
            properties |= {
                "listeners": properties["listeners"] + tls,
                "advertised.listeners": properties["advertised.listeners"] + tls,
                "listener.security.protocol.map": properties["listener.security.protocol.map"]
                + ",SSL:SSL",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(keystore),
            }
        properties |= {
            "log.segment.bytes": str(self.settings.segment_bytes),
            "num.partitions": str(self.settings.default_partitions),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **GROUP_COORDINATOR,
            "log.retention.check.interval.ms": str(self.settings.retention_check_interval_ms),
            "log.cleaner.backoff.ms": str(self.settings.cleaner_backoff_ms),
        }
        config = node.config_path
        write_properties(config, properties)
        (home / "log4j2.properties").write_text(_LOG4J2_QUIET)
        return config

    def _java(self, main_class: str, *args: str) -> list[str]:
        log4j = self.settings.data_root / self.name / "log4j2.properties"
        return [
            "java",
            *KAFKA_JVM_OPTS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    def prepare(self) -> None:
        config = self._write_config()
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                new_cluster_id(),
                "-c",
                str(config),
                # KIP-848's consumer groups (the default of the latest metadata.version; stated
                # so that a Kafka whose default differs fails here, not in the workload).
                "--feature",
                "group.version=1",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def command(self) -> list[str]:
        return self._java(
            "kafka.Kafka", str(self.settings.data_root / self.name / "server.properties")
        )


@dataclass
class KrustBroker(BrokerProcess):
    """krust from the release build installed in the benchmark venv."""

    executable: Path = Path()
    name: str = "krust"
    # The Prometheus endpoint's port (docs/metrics.md); None: off, krust's default.
    metrics_port: int | None = None
    # More `--override key=value`s (the authorization workload turns the authorizer on).
    overrides: dict[str, str] = field(default_factory=dict)

    def command(self) -> list[str]:
        metrics = [] if self.metrics_port is None else ["--metrics-port", str(self.metrics_port)]
        keystore = self.settings.tls_keystore
        tls = ["ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"] if keystore else []
        return [
            str(self.executable),
            *metrics,
            *(arg for setting in tls for arg in ("--override", setting)),
            "--override",
            f"listeners=PLAINTEXT://{HOST}:{self.port}"
            + (f",SSL://{HOST}:{self.tls_port}" if keystore else ""),
            "--override",
            f"log.dirs={self.data_dir}",
            "--override",
            f"log.segment.bytes={self.settings.segment_bytes}",
            "--override",
            f"num.partitions={self.settings.default_partitions}",
            "--override",
            f"log.retention.check.interval.ms={self.settings.retention_check_interval_ms}",
            "--override",
            f"log.cleaner.backoff.ms={self.settings.cleaner_backoff_ms}",
            *(
                arg
                for key, value in (GROUP_COORDINATOR | self.overrides).items()
                for arg in ("--override", f"{key}={value}")
            ),
        ]


def krust_executable() -> Path:
    """`krust-broker` next to the running interpreter (the benchmark venv's)."""
    candidate = Path(sys.executable).parent / "krust-broker"
    if not os.access(candidate, os.X_OK):
        raise FileNotFoundError(f"{candidate} missing: install the release wheel (README)")
    return candidate
