"""Moving a replica between the log dirs of one broker (AlterReplicaLogDirs, KIP-113) with
Kafka's own tools: kafka-reassign-partitions with `log_dirs` starts the move while a producer
writes, kafka-log-dirs shows the future replica copying and then the replica in its new dir,
and every record acknowledged before and during the move is read back once, in order, also
when the broker is killed mid-copy and the restarted broker resumes the move."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from .clients.confluent import assigned_consumer, create_topic, poll_records
from .kafka_cli import REASSIGN_PARTITIONS_COMMAND, tool_output

LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"
TOPIC = "moved"
NODE_ID = 1
BEFORE = 600
# The copy runs at this rate, so the move lasts a few seconds and can be watched.
COPY_BYTES_PER_SECOND = 100_000
MOVE_TIMEOUT_S = 60.0

# (log dir, is future, offset lag) of each replica of TOPIC.
Replica = tuple[str, bool, int]


def replicas(bootstrap: str) -> list[Replica]:
    """kafka-log-dirs --describe, as its JSON reports TOPIC's replicas."""
    output = tool_output(
        LOG_DIRS_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic-list", TOPIC
    )
    described = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    (broker,) = described["brokers"]
    return sorted(
        (directory["logDir"], partition["isFuture"], partition["offsetLag"])
        for directory in broker["logDirs"]
        for partition in directory["partitions"]
        if partition["partition"] == f"{TOPIC}-0"
    )


class BackgroundProducer:
    """Produces numbered values with acks=all until stopped; the acknowledged ones."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
        )
        self.acknowledged: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            value = message.value()
            assert value is not None
            self.acknowledged.append(value)

    def _run(self) -> None:
        sent = 0
        while not self.stopping.is_set():
            self.producer.produce(
                TOPIC, value=b"during-%06d" % sent, partition=0, on_delivery=self._on_delivery
            )
            sent += 1
            self.producer.poll(0.02)

    def __enter__(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()
        assert self.producer.flush(30) == 0, "records left undelivered"


def test_kafka_reassign_partitions_moves_a_replica_to_another_log_dir_while_producing(
    broker_factory, tmp_path: Path
) -> None:
    dirs = [str((tmp_path / name).resolve()) for name in ("d1", "d2")]
    broker = broker_factory(
        {
            "log.dirs": ",".join(dirs),
            "replica.alter.log.dirs.io.max.bytes.per.second": str(COPY_BYTES_PER_SECOND),
        }
    )
    throttle = ("--replica-alter-log-dirs-throttle", str(COPY_BYTES_PER_SECOND))
    create_topic(broker.bootstrap, TOPIC)
    # One record per batch: the copy moves whole batches, so small ones spread it over time.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "batch.num.messages": 1}
    )
    before = [b"before-%06d-" % i + b"x" * 1000 for i in range(BEFORE)]
    for value in before:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(30) == 0
    [(source, is_future, lag)] = replicas(broker.bootstrap)
    assert (is_future, lag) == (False, 0)
    destination = next(d for d in dirs if d != source)

    plan = tmp_path / "move.json"
    partition = {"topic": TOPIC, "partition": 0, "replicas": [NODE_ID], "log_dirs": [destination]}
    plan.write_text(json.dumps({"version": 1, "partitions": [partition]}))
    reassign = ("--bootstrap-server", broker.bootstrap, "--reassignment-json-file", str(plan))
    with BackgroundProducer(broker.bootstrap) as during:
        executed = tool_output(REASSIGN_PARTITIONS_COMMAND, *reassign, "--execute", *throttle)
        assert "Successfully started partition reassignment" in executed, executed
        started = (
            f"Successfully started moving log directory to {destination} for replica {TOPIC}-0"
        )
        assert started in executed, executed
        # The tool sets the dynamic throttle (the broker's static one is the same rate).
        throttled = f"replica-alter-dir throttle limit was set to {COPY_BYTES_PER_SECOND} B/s"
        assert throttled in executed, executed
        # The future replica copies in the destination dir, behind the current one.
        moving = replicas(broker.bootstrap)
        assert len(moving) == 2, moving
        (future,) = [r for r in moving if r[1]]
        assert future[0] == destination and future[2] > 0, moving
        assert [r for r in moving if not r[1]] == [(source, False, 0)]
        verified = tool_output(REASSIGN_PARTITIONS_COMMAND, *reassign, "--verify")
        assert "is still in progress" in verified, verified
    assert during.errors == [] and len(during.acknowledged) > 0

    # Killed mid-copy: the restarted broker resumes the copy and finishes the move.
    broker.kill9()
    broker.restart()
    resumed = replicas(broker.bootstrap)
    assert [r[:2] for r in resumed] == sorted([(source, False), (destination, True)]), resumed
    deadline = time.monotonic() + MOVE_TIMEOUT_S
    while (moved := replicas(broker.bootstrap)) != [(destination, False, 0)]:
        assert time.monotonic() < deadline, moved
        time.sleep(0.5)
    verified = tool_output(REASSIGN_PARTITIONS_COMMAND, *reassign, "--verify")
    assert f"Reassignment of replica {TOPIC}-0-{NODE_ID} completed successfully" in verified
    assert f"Clearing broker-level throttles on broker {NODE_ID}" in verified

    # The old directory is renamed for deletion; the new one holds the partition.
    assert not (Path(source) / f"{TOPIC}-0").exists()
    assert (Path(destination) / f"{TOPIC}-0").is_dir()
    expected = before + during.acknowledged
    consumer = assigned_consumer(broker.bootstrap, TOPIC, 0)
    try:
        consumed = poll_records(consumer, len(expected), timeout_s=30)
    finally:
        consumer.close()
    assert [c.offset for c in consumed] == list(range(len(expected)))
    assert [c.record.value for c in consumed] == expected
