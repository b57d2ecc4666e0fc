"""krust's pytest plugin (kafka_broker, kafka_topic, --krust-config), run as users run it: pytest
in a subprocess on a generated test directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from .process_checks import process_alive

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120.0

# Each generated test records what a user could see of its broker: where it serves, its pid,
# its data dir, and which xdist worker ran it.
RECORD = """
import json, os, pathlib

def record(broker, **extra):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"{worker}-{os.getpid()}-{extra.get('topic', len(extra))}.json"
    path = pathlib.Path(os.environ["RECORDS"]) / name
    fields = {"bootstrap": broker.bootstrap_servers, "pid": broker.pid,
              "data_dir": str(broker.data_dir), "worker": worker, **extra}
    # Complete when it appears: the interrupted session's test waits for the first record.
    path.with_suffix(".tmp").write_text(json.dumps(fields))
    path.with_suffix(".tmp").rename(path)
"""


class Project:
    """A generated test directory and pytest runs on it, with its own temporary directory.
    pytest loads the plugin by `-p`, so the run does not depend on how krust is installed, or
    through the entry points of the dist-info directories in `entry_point_site`."""

    def __init__(self, root: Path, tests: str, entry_point_site: Path | None = None) -> None:
        self.root = root
        self.entry_point_site = entry_point_site
        self.records = root / "records"
        self.tmp = root / "tmp"
        for directory in (self.records, self.tmp, root / "suite"):
            directory.mkdir(parents=True)
        (root / "suite" / "pytest.ini").write_text("[pytest]\n")
        (root / "suite" / "record.py").write_text(RECORD)
        (root / "suite" / "test_app.py").write_text(tests)

    def command(self, *args: str) -> list[str]:
        plugin = ["-p", "krust.testing.pytest_plugin"] if self.entry_point_site is None else []
        return [
            sys.executable,
            "-m",
            "pytest",
            *plugin,
            "-p",
            "no:cacheprovider",
            f"--basetemp={self.root / 'basetemp'}",
            *args,
            str(self.root / "suite"),
        ]

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "RECORDS": str(self.records), "TMPDIR": str(self.tmp)}
        if self.entry_point_site is None:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        else:
            env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
            path = [str(self.entry_point_site), env.get("PYTHONPATH", "")]
            env["PYTHONPATH"] = os.pathsep.join(path)
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.root,
            timeout=RUN_TIMEOUT_S,
        )

    def recorded(self) -> list[dict[str, str]]:
        return [json.loads(path.read_text()) for path in sorted(self.records.glob("*.json"))]

    def assert_nothing_left(self) -> None:
        for record in self.recorded():
            assert not process_alive(int(record["pid"])), f"broker {record['pid']} still runs"
        assert list(self.tmp.iterdir()) == [], "temporary directories left behind"


def test_the_fixtures_give_a_session_broker_fresh_topics_and_take_config(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        """
import os
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from record import record

def test_unused_fixtures_start_no_broker():
    children = [p for p in os.listdir("/proc") if p.isdigit() and _parent(p) == os.getpid()]
    assert children == []

def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except FileNotFoundError:
        return None

def test_one(kafka_broker, kafka_topic):
    record(kafka_broker, topic=kafka_topic)

def test_two(kafka_broker, kafka_topic):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("auto-created", b"x")
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    topics = admin.list_topics(timeout=30).topics
    assert kafka_topic in topics
    broker = ConfigResource("broker", "1")
    delay = admin.describe_configs([broker])[broker].result(30)["group.initial.rebalance.delay.ms"]
    record(
        kafka_broker,
        topic=kafka_topic,
        partitions=len(topics["auto-created"].partitions),
        rebalance_delay=delay.value,
    )

@pytest.mark.kafka_topic(partitions=3, config={"cleanup.policy": "compact"})
def test_three(kafka_broker, kafka_topic):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    described = admin.list_topics(kafka_topic, timeout=30).topics[kafka_topic]
    resource = ConfigResource("topic", kafka_topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    policy = configs["cleanup.policy"].value
    record(kafka_broker, topic=kafka_topic, partitions=len(described.partitions), policy=policy)
""",
    )

    run = project.run("--krust-config", "num.partitions=4")

    assert run.returncode == 0, run.stdout + run.stderr
    by_test = {record["topic"].partition("-")[0]: record for record in project.recorded()}
    one, two, three = by_test["test_one"], by_test["test_two"], by_test["test_three"]
    assert one["bootstrap"] == two["bootstrap"] == three["bootstrap"]  # one broker
    assert len({one["topic"], two["topic"], three["topic"]}) == 3
    assert one["topic"].startswith("test_one-")
    assert two["partitions"] == 4  # --krust-config num.partitions=4 acted
    assert two["rebalance_delay"] == "0"  # the fixture's default: a group's join does not wait
    assert (three["partitions"], three["policy"]) == (3, "compact")  # the marker acted
    project.assert_nothing_left()


def test_each_xdist_worker_has_its_own_broker(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        """
from record import record

def test_broker(kafka_broker, kafka_topic):
    record(kafka_broker)
""",
    )

    # --dist each: both workers run the test, so both need a broker.
    run = project.run("-p", "xdist", "-n", "2", "--dist", "each")

    assert run.returncode == 0, run.stdout + run.stderr
    records = project.recorded()
    assert sorted(record["worker"] for record in records) == ["gw0", "gw1"]
    assert len({record["bootstrap"] for record in records}) == 2
    assert len({record["pid"] for record in records}) == 2
    project.assert_nothing_left()


def test_a_failing_test_reports_the_broker_log_and_leaves_nothing(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        """
from record import record

def test_fails(kafka_broker, kafka_topic):
    record(kafka_broker)
    assert kafka_topic == "something else"

def test_passes_without_broker():
    pass
""",
    )

    run = project.run()

    assert run.returncode == 1, run.stdout + run.stderr
    section = run.stdout.split("krust broker log", 1)[1]
    (record,) = project.recorded()
    assert record["bootstrap"] in section  # the broker's start-up line
    assert "created log partition=test_fails-" in section
    assert "1 failed, 1 passed" in run.stdout
    project.assert_nothing_left()


def test_an_interrupted_session_leaves_nothing(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        """
import time
from record import record

def test_waits(kafka_broker):
    record(kafka_broker)
    time.sleep(600)
""",
    )

    session = subprocess.Popen(
        project.command(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=project.env,
        cwd=project.root,
        # A suite started in the background inherits SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler: give the child the default disposition, as a terminal does.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not any(project.records.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        # Ctrl-C, sent to pytest only: pytest must stop the broker itself.
        session.send_signal(signal.SIGINT)
        output, _ = session.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        session.kill()

    assert "KeyboardInterrupt" in output
    assert len(project.recorded()) == 1
    project.assert_nothing_left()


def test_the_declared_entry_point_loads_the_plugin(tmp_path: Path) -> None:
    """pytest finds the plugin through the `pytest11` entry point pyproject.toml declares, as
    it does for an installed krust: here a dist-info holding just that entry point."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    entry_points = pyproject["project"]["entry-points"]["pytest11"]
    dist_info = tmp_path / "site" / "krust_plugin_entry-0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: krust-plugin-entry\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (dist_info / "entry_points.txt").write_text(f"[pytest11]\n{lines}")
    project = Project(tmp_path / "project", "def test_nothing():\n    pass\n", tmp_path / "site")

    run = project.run("--krust-config", "num.partitions")

    assert run.returncode == 4, run.stdout + run.stderr  # pytest's usage error
    assert "--krust-config expects KEY=VALUE, got 'num.partitions'" in run.stderr


def test_a_bad_krust_config_key_or_value_is_a_usage_error_when_pytest_starts(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path, "def test_broker(kafka_broker):\n    pass\n")

    misspelled = project.run("--krust-config", "num.partitons=4")
    refused = project.run("--krust-config", "num.partitions=0")

    assert misspelled.returncode == 4, misspelled.stdout + misspelled.stderr
    assert "unknown configuration key 'num.partitons'" in misspelled.stderr
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "num.partitions" in refused.stderr


def test_krust_port_chooses_the_fixtures_port_and_listeners_is_refused(tmp_path: Path) -> None:
    from krust.testing.embedded import free_port

    project = Project(
        tmp_path,
        """
from record import record

def test_broker(kafka_broker, kafka_topic):
    record(kafka_broker, topic=kafka_topic)
""",
    )
    port = free_port()

    run = project.run("--krust-port", str(port))
    listeners = project.run("--krust-config", f"listeners=PLAINTEXT://127.0.0.1:{port}")

    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = project.recorded()
    assert record["bootstrap"] == f"127.0.0.1:{port}"
    assert listeners.returncode == 4, listeners.stdout + listeners.stderr
    assert "listeners is set by the fixture; use --krust-port" in listeners.stderr
    project.assert_nothing_left()
