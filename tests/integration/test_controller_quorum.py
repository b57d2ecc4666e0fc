"""The controller quorum through `krust._core.Core` (docs/quorum.md): a single voter
commits proposals through Raft, hands them to the controller's callbacks in log order,
snapshots them in Kafka's format and loads the snapshot on the next start."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from krust import _core
from krust.config.broker import core_settings, load_config
from krust.controller.records import TopicRecord, encode_record

from .broker_process import HOST, BrokerProcess
from .kafka_cli import DUMP_LOG_SEGMENTS, run_java_tool, tool_output
from .ports import free_port

METADATA_DIR = "__cluster_metadata-0"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
DEADLINE_S = 60.0


class Controller:
    """Records what the quorum hands over, and on which thread."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, int, bytes]] = []
        self.loaded: list[tuple[int, list[bytes]]] = []
        self.leaders: list[tuple[int, int]] = []
        self.threads: set[str] = set()

    def apply(self, records: list[tuple[int, int, bytes]]) -> None:
        self.threads.add(threading.current_thread().name)
        self.applied.extend(records)

    def snapshot(self) -> list[bytes]:
        return [value for _, _, value in self.applied]

    def load_snapshot(self, end_offset: int, records: list[bytes]) -> None:
        self.loaded.append((end_offset, records))
        self.applied = []

    def leader_changed(self, leader_id: int, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))

    def start(self, core: _core.Core) -> None:
        core.start_quorum(self.apply, self.snapshot, self.load_snapshot, self.leader_changed)


def open_core(data: Path) -> _core.Core:
    config = load_config(None, {}, [f"log.dirs={data}", "listeners=PLAINTEXT://127.0.0.1:19092"])
    return _core.Core(core_settings(config))


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.05)


def test_a_single_voter_commits_proposals_and_reloads_its_snapshot(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    controller = Controller()
    controller.start(core)
    last = core.propose([b"first", b"second"])
    # propose returns once the records are committed and applied.
    epoch = controller.applied[-1][1]
    assert controller.applied == [(last - 1, epoch, b"first"), (last, epoch, b"second")]
    assert threading.current_thread().name not in controller.threads
    status = core.quorum_status()
    assert (status["leader_id"], status["is_leader"]) == (1, True)
    assert status["leader_epoch"] == epoch
    assert status["high_watermark"] == last + 1
    assert [v["replica_id"] for v in status["voters"]] == [1]
    wait_until(lambda: (1, epoch) in controller.leaders, "the leader is reported")

    core.trigger_metadata_snapshot()
    snapshots = tmp_path / METADATA_DIR
    wait_until(lambda: any(snapshots.glob("*.checkpoint")), "the snapshot is written")
    (snapshot,) = snapshots.glob("*.checkpoint")
    assert snapshot.name == f"{last + 1:020d}-{epoch:010d}.checkpoint"
    core.close()

    core = open_core(tmp_path)
    controller = Controller()
    controller.start(core)
    assert controller.loaded == [(last + 1, [b"first", b"second"])]
    after = core.propose([b"third"])
    assert after > last
    assert controller.applied[-1][2] == b"third"
    assert core.quorum_status()["leader_id"] == 1
    core.close()


def test_quorum_calls_before_start_are_refused(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    with pytest.raises(RuntimeError, match="not started"):
        core.propose([b"x"])
    core.close()


def test_kafkas_dump_log_decodes_the_quorums_metadata_log(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    Controller().start(core)
    record = encode_record(TopicRecord(name="quorum-topic", topic_id=uuid.uuid4()))
    core.propose([record])
    core.close()
    (segment,) = (tmp_path / METADATA_DIR).glob("*.log")
    dumped = tool_output(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", str(segment))
    assert re.search(r'"type":"TOPIC_RECORD".*"name":"quorum-topic"', dumped), dumped
    # The membership entry (KIP-853) and the new leader's LeaderChangeMessage.
    assert "KRaftVoters" in dumped, dumped
    assert "LeaderChange" in dumped, dumped


def test_kafka_metadata_quorum_describes_the_quorum_through_the_controller_listener(
    tmp_path: Path,
) -> None:
    plaintext, controller_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller_port}"
    config = load_config(
        None,
        {},
        [
            f"log.dirs={tmp_path}",
            f"listeners={listeners}",
            "controller.listener.names=CONTROLLER",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        ],
    )
    settings = core_settings(config)
    core = _core.Core(settings)
    Controller().start(core)
    last = core.propose([b"one"])
    serving = threading.Thread(target=core.serve, args=(lambda request: None, {}))
    serving.start()
    try:
        run = run_java_tool(
            METADATA_QUORUM,
            "--bootstrap-controller",
            f"127.0.0.1:{controller_port}",
            "describe",
            "--status",
        )
    finally:
        core.shutdown()
        serving.join()
        core.close()
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"LeaderId:\s+1\b", run.stdout), run.stdout
    assert re.search(rf"HighWatermark:\s+{last + 1}\b", run.stdout), run.stdout
    assert re.search(r"CurrentVoters:\s+\[.*\"id\":\s*1\b", run.stdout), run.stdout


def test_a_metadata_log_written_before_the_quorum_is_applied_whole(tmp_path: Path) -> None:
    core = open_core(tmp_path)
    # What single-node krust wrote: records appended directly, no voters, no quorum-state.
    core.internal_append("__cluster_metadata", 0, [(None, b"old-1"), (None, b"old-2")])
    core.close()
    core = open_core(tmp_path)
    controller = Controller()
    controller.start(core)
    last = core.propose([b"new"])
    assert [(o, v) for o, _, v in controller.applied] == [
        (0, b"old-1"),
        (1, b"old-2"),
        (last, b"new"),
    ]
    assert (tmp_path / METADATA_DIR / "quorum-state").exists()
    core.close()


def describe_status(*bootstrap: str) -> str:
    """`kafka-metadata-quorum <bootstrap> describe --status`'s output; the tool must succeed."""
    run = run_java_tool(METADATA_QUORUM, *bootstrap, "describe", "--status")
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_a_default_node_is_described_through_its_controller_listener_and_its_broker_listener(
    tmp_path: Path,
) -> None:
    """Kafka's single-node config shape (PLAINTEXT and CONTROLLER listeners,
    controller.listener.names left at its default): `--bootstrap-controller` reaches the
    controller listener, and both ways advertise the voter at its true endpoint. A data dir
    a quorum of one served on its broker listener (before it had a controller listener)
    reopens with one."""
    broker = BrokerProcess(tmp_path, {})
    try:
        broker.start()  # listeners: PLAINTEXT only, the voter on the broker's port
        broker.stop()
        controller_port = free_port()
        broker.overrides["listeners"] = (
            f"PLAINTEXT://{HOST}:{broker.port},CONTROLLER://{HOST}:{controller_port}"
        )
        broker.restart()
        endpoint = f'"CONTROLLER://{HOST}:{controller_port}"'
        via_controller = describe_status("--bootstrap-controller", f"{HOST}:{controller_port}")
        via_broker = describe_status("--bootstrap-server", broker.bootstrap)
    finally:
        broker.kill9()
    for output in (via_controller, via_broker):
        assert re.search(r"LeaderId:\s+1\b", output), output
        assert endpoint in output, output
