"""The admin apis operators use every day, through the Java Admin client, Kafka's tools,
confluent-kafka's AdminClient and raw requests: DescribeTopicPartitions (KIP-966),
DescribeLogDirs, DescribeProducers and OffsetForLeaderEpoch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from .broker_process import BrokerProcess
from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic
from .clients.java import run_java
from .kafka_api import call_broker
from .kafka_cli import tool_output

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_LEADER_EPOCH = 75
# Every operation a topic supports, as Kafka answers with no authorizer (KIP-430).
TOPIC_OPERATIONS = "ALTER,ALTER_CONFIGS,CREATE,DELETE,DESCRIBE,DESCRIBE_CONFIGS,READ,WRITE"

EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic


def produce(bootstrap: str, topic: str, values: list[bytes], *, idempotent: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0, "records left undelivered"


def test_java_describe_topics_uses_describe_topic_partitions(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "described-java", partitions=5)
    # Two partitions per response: the client follows the cursor through three pages.
    args = ("describe-partitions", module_broker.bootstrap, "described-java", "2")
    lines = run_java(*args).splitlines()
    # Only DescribeTopicPartitions answers authorized operations for describeTopics here.
    assert lines[-1] == f"operations {TOPIC_OPERATIONS}"
    partitions = [line.split() for line in lines[:-1]]
    assert [p[0] for p in partitions] == ["0", "1", "2", "3", "4"]
    for _, leader, replicas, isr, elr, last_known_elr in partitions:
        assert replicas == isr == f"[{leader}]"
        assert elr == last_known_elr == "[]"


def test_log_dirs_report_each_partitions_size(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "sized")
    produce(module_broker.bootstrap, "sized", [b"v" * 1000] * 5)
    log_dir = str(Path(module_broker.data_dir).resolve())

    lines = run_java("describe-log-dirs", module_broker.bootstrap).splitlines()
    dirs = [line.split() for line in lines if line.startswith("dir ")]
    assert [(d[1], d[2]) for d in dirs] == [(log_dir, "NONE")]
    total, usable = int(dirs[0][3]), int(dirs[0][4])
    assert 0 < usable <= total
    replicas = {
        (r[1], int(r[2])): r[3:] for r in (line.split() for line in lines) if r[0] == "replica"
    }
    size, lag, future = replicas[("sized", 0)]
    assert int(size) > 5000 and (lag, future) == ("0", "false")

    # Kafka's kafka-log-dirs tool prints the same as JSON.
    output = tool_output(
        "org.apache.kafka.tools.LogDirsCommand",
        "--bootstrap-server",
        module_broker.bootstrap,
        "--describe",
        "--topic-list",
        "sized",
    )
    described = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    (broker,) = described["brokers"]
    (directory,) = broker["logDirs"]
    assert (directory["logDir"], directory["error"]) == (log_dir, None)
    (partition,) = directory["partitions"]
    assert partition["partition"] == "sized-0"
    assert partition["size"] == int(size) and partition["offsetLag"] == 0


def test_describe_producers_shows_an_idempotent_producers_state(
    module_broker: BrokerProcess,
) -> None:
    create_topic(module_broker.bootstrap, "produced")
    produce(module_broker.bootstrap, "produced", [b"a", b"b", b"c"], idempotent=True)
    lines = run_java("describe-producers", module_broker.bootstrap, "produced", "0").splitlines()
    (producer,) = [line.split() for line in lines]
    producer_id, epoch, last_sequence, last_timestamp, coordinator_epoch, txn_start = map(
        int, producer
    )
    assert producer_id >= 0 and epoch == 0
    assert last_sequence == 2 and last_timestamp > 0
    assert (coordinator_epoch, txn_start) == (-1, -1)


def test_offsets_tools_and_confluent_admin(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "listed", partitions=2)
    produce(module_broker.bootstrap, "listed", [b"1", b"2", b"3"])
    output = tool_output(
        "org.apache.kafka.tools.GetOffsetShell",
        "--bootstrap-server",
        module_broker.bootstrap,
        "--topic",
        "listed",
        "--time",
        "-1",
    )
    assert sorted(output.split()) == ["listed:0:3", "listed:1:0"]

    admin = admin_client(module_broker.bootstrap)
    wanted = {
        TopicPartition("listed", 0): OffsetSpec.latest(),
        TopicPartition("listed", 1): OffsetSpec.earliest(),
    }
    listed = {
        tp.partition: future.result(ADMIN_TIMEOUT_S).offset
        for tp, future in admin.list_offsets(wanted, request_timeout=ADMIN_TIMEOUT_S).items()
    }
    assert listed == {0: 3, 1: 0}
    described = admin.describe_topics(TopicCollection(["listed"]), request_timeout=ADMIN_TIMEOUT_S)
    topic = described["listed"].result(ADMIN_TIMEOUT_S)
    assert [p.id for p in topic.partitions] == [0, 1]
    assert all([n.id for n in p.isr] == [p.leader.id] for p in topic.partitions)


def offset_for_epoch(port: int, topic: str, current_epoch: int, epoch: int) -> Any:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            EpochTopic(
                topic=topic,
                partitions=[
                    EpochTopic.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=current_epoch, leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    return call_broker(port, request, 4).topics[0].partitions[0]


def test_offset_for_leader_epoch_answers_from_the_epoch_cache(module_broker: BrokerProcess) -> None:
    create_topic(module_broker.bootstrap, "epochs")
    produce(module_broker.bootstrap, "epochs", [b"a", b"b", b"c"])
    port = module_broker.port

    found = offset_for_epoch(port, "epochs", -1, 0)
    assert (found.error_code, found.leader_epoch, found.end_offset) == (0, 0, 3)
    # An epoch no leader wrote yet has no end offset.
    later = offset_for_epoch(port, "epochs", 0, 7)
    assert (later.error_code, later.leader_epoch, later.end_offset) == (0, -1, -1)
    assert offset_for_epoch(port, "epochs", 5, 0).error_code == UNKNOWN_LEADER_EPOCH
    assert offset_for_epoch(port, "nowhere", -1, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION

    # The Java consumer validates a seeked position with it: offset 5 of epoch 0 is past the
    # end of epoch 0, so the log was truncated there.
    args = ("validate-position", module_broker.bootstrap, "epochs", "0")
    assert run_java(*args, "5", "0").split() == ["truncated", "3"]
    assert run_java(*args, "1", "0").split() == ["position", "3"]
