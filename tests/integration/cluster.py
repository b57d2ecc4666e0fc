"""Clusters of KRaft nodes on 127.0.0.1, combined broker+controller nodes
(`process.roles=broker,controller`) unless told other roles, Apache Kafka's or krust's,
behind one interface: start the
nodes in parallel, kill -9, pause (SIGSTOP), resume and restart a node on its own ports and data
dir, find a partition's leader and ISR and the active controller, stop everything.

Both kinds get the same server.properties, written with Kafka's keys, so a test or a benchmark
changes the cluster kind and nothing else. The integration tests and benches/ (which puts tests/
on sys.path) both start clusters with this module, so it needs only the standard library,
confluent-kafka and kafka-python (no pytest: failures raise ClusterError).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from .ports import free_port

HOST = "127.0.0.1"
COMBINED = "broker,controller"
# Three JVMs starting at once on two shared cores.
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
QUORUM_TIMEOUT_S = 60.0
LOG_TAIL_CHARS = 3000
TOOLS_LIBS = Path(__file__).resolve().parents[1] / "java" / "build" / "tools-libs"
# A dead broker is fenced, and its leaderships move, after this many ms without a heartbeat;
# Kafka's defaults (2 s heartbeats, 9 s session) would make every failover wait 9 s.
FAST_FAILOVER = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}
# Every node of a cluster, either kind.
COMMON_PROPERTIES = {
    **FAST_FAILOVER,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    # Leaders move only when a test moves them (Kafka would move them back to the preferred
    # replica on its own every 5 minutes).
    "auto.leader.rebalance.enable": "false",
}
KAFKA_LOG4J2 = """\
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""
# Small heaps, and C1 only: a test cluster's JVMs spend their CPU on starting, not on peak speed.
TEST_JVM_OPTIONS = ("-Xmx512m", "-XX:TieredStopAtLevel=1")


class ClusterError(Exception):
    """A node did not start, died, or the cluster did not reach the state waited for in time."""


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (base64url of a UUID, no padding)."""
    cluster_id = "-"
    while cluster_id.startswith("-"):  # kafka-storage would read it as an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return cluster_id


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Node:
    """Where one node lives: its id, its client and controller ports, its home directory,
    and its process.roles."""

    node_id: int
    port: int
    controller_port: int
    home: Path
    roles: str = COMBINED

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def controller_endpoint(self) -> str:
        return f"{HOST}:{self.controller_port}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.home / "node.log"

    def log_tail(self) -> str:
        if not self.log_path.exists():
            return "(no output)"
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]


def server_properties(node: Node, nodes: Sequence[Node]) -> dict[str, str]:
    """`node` of `nodes`: the controllers among them are the static voter set (KIP-595); a
    broker listens on PLAINTEXT, a controller on CONTROLLER."""
    voters = ",".join(
        f"{peer.node_id}@{peer.controller_endpoint}" for peer in nodes if peer.is_controller
    )
    listeners = [f"PLAINTEXT://{node.bootstrap}"] if node.is_broker else []
    if node.is_controller:
        listeners.append(f"CONTROLLER://{node.controller_endpoint}")
    properties = {
        "process.roles": node.roles,
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.data_dir),
    }
    if node.is_broker:
        properties["advertised.listeners"] = f"PLAINTEXT://{node.bootstrap}"
        properties["inter.broker.listener.name"] = "PLAINTEXT"
    return properties


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))


def read_properties(path: Path) -> dict[str, str]:
    """`key=value` lines of a .properties file (no continuations or escapes)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass(frozen=True)
class PartitionState:
    leader: int
    replicas: list[int]
    isr: list[int]


class Cluster(ABC):
    """`size` nodes with ids 1..size under `root`, combined unless `roles` gives each node's
    process.roles; `properties` go to every node."""

    kind: str

    def __init__(
        self,
        root: Path,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        roles: Sequence[str] | None = None,
    ):
        roles = roles or [COMBINED] * size
        self.nodes = [
            Node(node_id, free_port(), free_port(), root / f"node-{node_id}", node_roles)
            for node_id, node_roles in zip(range(1, len(roles) + 1), roles, strict=True)
        ]
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._paused: set[int] = set()
        # Nodes this object killed: any other node found dead exited by itself.
        self._killed: set[int] = set()
        for node in self.nodes:
            node.data_dir.mkdir(parents=True)
            chosen = {
                **COMMON_PROPERTIES,
                **server_properties(node, self.nodes),
                **(properties or {}),
            }
            write_properties(node.config_path, chosen)

    @abstractmethod
    def command(self, node: Node) -> list[str]:
        """The command line that runs `node` with its server.properties."""

    def environment(self) -> dict[str, str] | None:
        """The nodes' environment; None: this process's."""
        return None

    def prepare(self) -> None:  # noqa: B027 (only Kafka's nodes need one)
        """One-time set-up before the nodes first start."""

    @property
    def brokers(self) -> list[Node]:
        return [node for node in self.nodes if node.is_broker]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap for node in self.brokers)

    @property
    def bootstrap_controllers(self) -> str:
        """For tools' --bootstrap-controller (KIP-919)."""
        return ",".join(node.controller_endpoint for node in self.nodes if node.is_controller)

    def node(self, node_id: int) -> Node:
        return next(node for node in self.nodes if node.node_id == node_id)

    def running(self, node_id: int) -> bool:
        process = self._processes.get(node_id)
        return process is not None and process.poll() is None

    def live_node_ids(self) -> list[int]:
        """Nodes running and not paused."""
        return [
            node.node_id
            for node in self.nodes
            if self.running(node.node_id) and node.node_id not in self._paused
        ]

    def live_bootstrap(self) -> str:
        """The live nodes that accept connections (so a client does not log refusals)."""
        listening = [
            self.node(node_id).bootstrap
            for node_id in self.live_node_ids()
            if self.node(node_id).is_broker and _accepts_connections(self.node(node_id).port)
        ]
        if not listening:
            raise ClusterError(f"no {self.kind} node accepts connections")
        return ",".join(listening)

    def start(self) -> Cluster:
        """Start every node at once; return when all brokers are registered and unfenced."""
        self.prepare()
        for node in self.nodes:
            self._spawn(node)
        self.wait_registered([node.node_id for node in self.brokers])
        return self

    def _spawn(self, node: Node) -> None:
        assert not self.running(node.node_id), f"node {node.node_id} already running"
        with node.log_path.open("ab") as log:
            self._processes[node.node_id] = subprocess.Popen(
                self.command(node),
                cwd=node.home,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self._killed.discard(node.node_id)

    def kill9(self, node_id: int) -> None:
        process = self._processes[node_id]
        process.kill()
        process.wait(STOP_TIMEOUT_S)
        self._paused.discard(node_id)
        self._killed.add(node_id)

    def terminate(self, node_id: int) -> None:
        """SIGTERM: the node shuts down as it chooses (a controlled shutdown first); `running`
        tells when it has exited."""
        self._processes[node_id].send_signal(signal.SIGTERM)
        self._killed.add(node_id)

    def accepts_connections(self, node_id: int) -> bool:
        return _accepts_connections(self.node(node_id).port)

    def pause(self, node_id: int) -> None:
        self._processes[node_id].send_signal(signal.SIGSTOP)
        self._paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self._processes[node_id].send_signal(signal.SIGCONT)
        self._paused.discard(node_id)

    def restart(self, node_id: int) -> None:
        """Start a killed node again (same ports, same data dir); return once it is registered
        and unfenced (a controller-only node once it listens)."""
        node = self.node(node_id)
        self._spawn(node)
        if node.is_broker:
            self.wait_registered([node_id])
        else:
            self.wait_listening(node)

    def unexpected_exits(self) -> list[int]:
        """Nodes that exited without being killed."""
        return [
            node_id
            for node_id in self._processes
            if not self.running(node_id) and node_id not in self._killed
        ]

    def heal(self) -> None:
        """Resume paused nodes and restart killed ones: every node registered and unfenced
        again. A node that exited by itself is a ClusterError."""
        self._check_alive(self.unexpected_exits())
        for node_id in list(self._paused):
            self.resume(node_id)
        for node in self.nodes:
            if not self.running(node.node_id):
                self._spawn(node)
        self.wait_registered([node.node_id for node in self.brokers])

    def stop(self) -> None:
        """kill -9 every node (a paused one too): the data is thrown away afterwards."""
        for node_id in self._processes:
            if self.running(node_id):
                self.kill9(node_id)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.live_bootstrap()})

    def _check_alive(self, node_ids: Sequence[int]) -> None:
        for node_id in node_ids:
            process = self._processes.get(node_id)
            if process is not None and process.poll() is not None:
                node = self.node(node_id)
                raise ClusterError(
                    f"{self.kind} node {node_id} exited with {process.returncode}; "
                    f"its output:\n{node.log_tail()}"
                )

    def registered_node_ids(self) -> set[int]:
        """The brokers the cluster reports registered and unfenced (DescribeCluster)."""
        admin = self.admin()  # must outlive the future
        described = admin.describe_cluster(request_timeout=5).result(10)
        return {node.id for node in described.nodes}

    def wait_registered(self, node_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every one of `node_ids` accepts connections and the cluster lists it as
        registered and unfenced (a node killed moments ago may still be listed: its own
        listener tells the new process from the old registration)."""
        wanted = set(node_ids)
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            self._check_alive(node_ids)
            try:
                seen = self.registered_node_ids()
            except (KafkaException, ClusterError, TimeoutError):
                seen = set()  # not listening or not answering yet
            listening = all(_accepts_connections(self.node(n).port) for n in wanted)
            if listening and wanted <= seen:
                return
            time.sleep(0.2)
        tails = "\n".join(f"node {n}:\n{self.node(n).log_tail()}" for n in sorted(wanted - seen))
        raise ClusterError(
            f"{self.kind} nodes {sorted(wanted - seen)} not registered within {timeout_s:.0f} s "
            f"(registered: {sorted(seen)}); their output:\n{tails}"
        )

    def wait_listening(self, node: Node, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until a controller-only node accepts connections on its controller listener."""
        deadline = time.monotonic() + timeout_s
        while not _accepts_connections(node.controller_port):
            self._check_alive([node.node_id])
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.kind} node {node.node_id} does not listen")
            time.sleep(0.2)

    def active_controller(self, timeout_s: float = QUORUM_TIMEOUT_S) -> int:
        """The quorum's leader (DescribeQuorum through a live broker), once it is a live node.
        confluent-kafka has no DescribeQuorum; kafka-python's admin client does."""
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self.live_bootstrap(), request_timeout_ms=5000
                )
                try:
                    quorum = admin.describe_metadata_quorum()
                finally:
                    admin.close()
                leader = int(quorum["topics"][0]["partitions"][0]["leader_id"])
                if leader in self.live_node_ids():
                    return leader
            except (KafkaError, ClusterError, OSError) as error:
                last_error = error
            time.sleep(0.2)
        raise ClusterError(f"no live active controller within {timeout_s:.0f} s: {last_error!r}")

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Leader, replicas and ISR as the cluster describes them (DescribeTopicPartitions)."""
        admin = self.admin()  # must outlive the future
        described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
        found = next(info for info in described.partitions if info.id == partition)
        return PartitionState(
            leader=-1 if found.leader is None else found.leader.id,
            replicas=[replica.id for replica in found.replicas],
            isr=[replica.id for replica in found.isr],
        )

    def wait_fenced(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Wait until a live broker's Metadata no longer lists `node_id` (fenced): clients
        then stop picking it, e.g. as the admin client's "controller"."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                brokers = self.admin().list_topics(timeout=5).brokers
            except KafkaException:
                brokers = {node_id: None}  # the node asked may just have died; ask again
            if node_id not in brokers:
                return
            time.sleep(0.1)
        raise ClusterError(f"node {node_id} still listed as a broker after {timeout_s:.0f} s")

    def wait_partition(
        self,
        topic: str,
        partition: int,
        accept: Callable[[PartitionState], bool],
        what: str,
        timeout_s: float = 60.0,
    ) -> PartitionState:
        """Poll the partition's state until `accept(state)` holds; ClusterError after
        `timeout_s`, naming `what` was waited for."""
        deadline = time.monotonic() + timeout_s
        state: PartitionState | None = None
        while time.monotonic() < deadline:
            try:
                state = self.partition_state(topic, partition)
            except (KafkaException, ClusterError, TimeoutError):
                state = None  # the node asked may just have died; ask again
            if state is not None and accept(state):
                return state
            time.sleep(0.1)
        raise ClusterError(f"{topic}-{partition}: {what} not within {timeout_s:.0f} s: {state}")

    def partition_leader(self, topic: str, partition: int, timeout_s: float = 60.0) -> int:
        """The partition's leader, once it is a live node."""
        live = self.live_node_ids()
        return self.wait_partition(
            topic, partition, lambda state: state.leader in live, "a live leader", timeout_s
        ).leader

    def wait_new_leader(self, topic: str, partition: int, old: int, timeout_s: float = 60.0) -> int:
        """The partition's leader once it is a live node other than `old`."""
        return self.wait_partition(
            topic,
            partition,
            lambda state: state.leader not in (-1, old) and state.leader in self.live_node_ids(),
            f"a new leader in place of {old}",
            timeout_s,
        ).leader

    def wait_full_isr(self, topic: str, partition: int, timeout_s: float = 60.0) -> None:
        """Every replica back in the ISR."""
        self.wait_partition(
            topic,
            partition,
            lambda state: sorted(state.isr) == sorted(state.replicas),
            "every replica in the ISR",
            timeout_s,
        )


class ApacheKafkaCluster(Cluster):
    """Apache Kafka (kafka.Kafka) in KRaft combined mode, formatted with kafka-storage."""

    kind = "kafka"

    def __init__(
        self,
        root: Path,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        roles: Sequence[str] | None = None,
        *,
        libs: Path = TOOLS_LIBS,
        jvm_options: Sequence[str] = TEST_JVM_OPTIONS,
    ) -> None:
        super().__init__(root, size, properties, roles)
        self.libs = libs
        self.jvm_options = tuple(jvm_options)
        self.log4j = root / "log4j2.properties"
        self.log4j.write_text(KAFKA_LOG4J2)

    def java(self, main_class: str, *args: str) -> list[str]:
        return [
            "java",
            *self.jvm_options,
            f"-Dlog4j2.configurationFile={self.log4j}",
            "-cp",
            str(self.libs / "*"),
            main_class,
            *args,
        ]

    def prepare(self) -> None:
        """kafka-storage format of every node with one cluster id, in parallel."""
        cluster_id = new_cluster_id()
        formats = [
            subprocess.Popen(
                self.java(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    str(node.config_path),
                ),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for node in self.nodes
        ]
        for process in formats:
            output, _ = process.communicate(timeout=START_TIMEOUT_S)
            if process.returncode != 0:
                raise ClusterError(f"kafka-storage format failed: {output.decode()}")

    def command(self, node: Node) -> list[str]:
        return self.java("kafka.Kafka", str(node.config_path))


class KrustCluster(Cluster):
    """`krust-broker --config server.properties` per node, on the same keys Kafka reads."""

    kind = "krust"

    def __init__(
        self,
        root: Path,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        roles: Sequence[str] | None = None,
        *,
        executable: Path | None = None,
    ) -> None:
        # krust formats its own log dirs at first start; the nodes must agree on the id.
        cluster_id = {"cluster.id": new_cluster_id()}
        super().__init__(root, size, {**cluster_id, **(properties or {})}, roles)
        found = executable or shutil.which("krust-broker")
        if found is None:
            raise ClusterError("krust-broker is not on PATH: run scripts/install-test-deps.sh")
        self.executable = Path(found)

    def environment(self) -> dict[str, str]:
        """This process's environment without any KRUST_* a developer may have set."""
        return {name: value for name, value in os.environ.items() if not name.startswith("KRUST_")}

    def command(self, node: Node) -> list[str]:
        return [str(self.executable), "--config", str(node.config_path)]
