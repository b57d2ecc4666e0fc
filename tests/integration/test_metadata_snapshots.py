"""Metadata snapshots on a real broker: the controller writes KRaft `.checkpoint` files, the
metadata log before them is deleted, a restart (clean or kill -9) loads the newest snapshot and
replays the rest, and Kafka's own tools read our snapshots."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import ConfigResource

from .broker_process import BrokerProcess
from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic, topic_id
from .groups_support import wait_until
from .kafka_cli import DUMP_LOG_SEGMENTS, run_java_tool, tool_output
from .test_config_cli import run_broker_cli

# A snapshot after every change, a segment per change, and only the newest snapshot kept: the
# metadata log shrinks as soon as a second snapshot exists.
SNAPSHOTTING = {
    "metadata.log.max.record.bytes.between.snapshots": "1",
    "metadata.log.segment.ms": "1",
    "metadata.max.retention.bytes": "0",
}
METADATA_SHELL = "org.apache.kafka.shell.MetadataShell"
TOPICS = [f"snap-{n}" for n in range(4)]
WAIT_S = 30.0


def metadata_dir(broker: BrokerProcess) -> Path:
    return broker.data_dir / "__cluster_metadata-0"


def checkpoints(broker: BrokerProcess) -> list[Path]:
    return sorted(metadata_dir(broker).glob("*.checkpoint"))


def first_segment_base(broker: BrokerProcess) -> int:
    return min(int(path.stem) for path in metadata_dir(broker).glob("*.log"))


def snapshot_end_offset(path: Path) -> int:
    return int(path.name.split("-")[0])


def cluster_state(bootstrap: str) -> dict[str, tuple[object, int, str]]:
    """Each test topic's id, partition count and retention.ms, as clients see them."""
    admin = admin_client(bootstrap)
    listed = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in TOPICS]
    configs = {
        resource.name: future.result(ADMIN_TIMEOUT_S)
        for resource, future in admin.describe_configs(resources).items()
    }
    return {
        name: (
            topic_id(bootstrap, name),
            len(listed[name].partitions),
            configs[name]["retention.ms"].value,
        )
        for name in TOPICS
    }


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "snapshots", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(consumer, values) >= count, WAIT_S, f"{count} records")
    finally:
        consumer.close()
    return values


def _poll_into(consumer: Consumer, values: list[bytes]) -> int:
    message = consumer.poll(0.5)
    if message is not None and message.error() is None:
        values.append(message.value())
    return len(values)


def test_snapshots_replace_the_log_they_cover_and_a_restart_loads_them(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    # read_all's group forms at once: no initial rebalance delay.
    broker = broker_factory({**SNAPSHOTTING, "group.initial.rebalance.delay.ms": "0"})
    for n, name in enumerate(TOPICS):
        create_topic(
            broker.bootstrap, name, partitions=n + 1, config={"retention.ms": f"{n + 1}000000"}
        )
    wait_until(
        lambda: len(checkpoints(broker)) == 1 and first_segment_base(broker) > 0,
        WAIT_S,
        "one snapshot left and the metadata log trimmed below it",
    )
    before = cluster_state(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(TOPICS[-1], b"kept")
    assert producer.flush(ADMIN_TIMEOUT_S) == 0

    broker.stop()
    broker.restart()
    assert cluster_state(broker.bootstrap) == before
    assert read_all(broker.bootstrap, TOPICS[-1], 1) == [b"kept"]

    broker.kill9()
    broker.restart()
    assert cluster_state(broker.bootstrap) == before
    create_topic(broker.bootstrap, "after-restart")


def test_kafka_tools_read_our_snapshots(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory(SNAPSHOTTING)
    create_topic(broker.bootstrap, "shown", partitions=2)
    create_topic(broker.bootstrap, "also-shown")
    wait_until(
        lambda: any(
            "also-shown" in path.read_bytes().decode("latin-1") for path in checkpoints(broker)
        ),
        WAIT_S,
        "a snapshot with both topics",
    )
    broker.stop()
    snapshot = shutil.copy(checkpoints(broker)[-1], tmp_path)

    dumped = tool_output(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", snapshot)
    assert re.search(r'"type":"TOPIC_RECORD".*"name":"shown"', dumped), dumped
    assert '"type":"PARTITION_RECORD"' in dumped
    assert "SnapshotHeader" in dumped and "SnapshotFooter" in dumped, dumped

    def shell(*command: str) -> str:
        # Kafka's shell runs the command once its MetadataLoader has applied an offset
        # (waitUntilCaughtUp), which can be before its publisher has built the tree the command
        # reads: now and then the same snapshot lists nothing. Another run reads it again.
        for _ in range(3):
            run = run_java_tool(METADATA_SHELL, "--snapshot", str(snapshot), *command)
            assert run.returncode == 0, run.stderr
            if run.stdout.strip():
                break
        return run.stdout

    assert shell("ls", "/image/topics/byName").split() == ["also-shown", "shown"]
    partition = shell("cat", "/image/topics/byName/shown/1")
    assert "leader=1," in partition and "isr=[1]" in partition, partition


def test_an_unreadable_snapshot_stops_the_start_up_naming_it_and_keeps_the_data(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory(SNAPSHOTTING)
    for name in ("one", "two"):
        create_topic(broker.bootstrap, name)
    wait_until(lambda: first_segment_base(broker) > 0, WAIT_S, "the log trimmed below a snapshot")
    broker.stop()
    newest = checkpoints(broker)[-1]
    whole = newest.read_bytes()
    newest.write_bytes(whole[: len(whole) // 2])
    segments = sorted(metadata_dir(broker).glob("*.log"))

    refused = run_broker_cli(["--override", f"log.dirs={broker.data_dir}"], tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert newest.name in refused.stderr, refused.stderr
    assert sorted(metadata_dir(broker).glob("*.log")) == segments
    assert newest.read_bytes() == whole[: len(whole) // 2]

    newest.write_bytes(whole)
    broker.restart()
    assert {"one", "two"} <= set(admin_client(broker.bootstrap).list_topics(timeout=10).topics)
