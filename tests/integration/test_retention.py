"""The log's lifecycle as an operator sees it: retention by time and size deletes whole old
segments (renamed `.deleted`, removed after `file.delete.delay.ms`), DeleteRecords moves the log
start offset, consumers below it reset per `auto.offset.reset`, and the start offset survives a
restart. Driven by confluent-kafka and Kafka's own command-line tools."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from .broker_process import BrokerProcess
from .clients.confluent import (
    ADMIN_TIMEOUT_S,
    create_topic,
    delete_records,
    watermarks,
)
from .groups_support import GROUP_BROKER_OVERRIDES, RawGroupConnection, wait_for_coordinator
from .kafka_cli import tool_output

# Retention checks every 100 ms, so each test waits for a pass, never for a period.
BROKER_OVERRIDES = {**GROUP_BROKER_OVERRIDES, "log.retention.check.interval.ms": "100"}
# Kafka's test-only segment size: a few records make a segment.
SMALL_SEGMENTS = {"internal.segment.bytes": "1000"}
HOUR_MS = 3_600_000
WAIT_S = 30.0
DELETE_RECORDS = 21
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(BROKER_OVERRIDES)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def produce_one_by_one(bootstrap: str, topic: str, count: int, timestamp_ms: int = 0) -> None:
    """`count` ~200-byte records, each its own batch (so segments fill record by record)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for number in range(count):
        producer.produce(
            topic, value=f"record-{number:04d}-".encode() * 16, partition=0, timestamp=timestamp_ms
        )
        assert producer.flush(ADMIN_TIMEOUT_S) == 0, "a record was not delivered"


def partition_dir(broker: BrokerProcess, topic: str) -> Path:
    return broker.data_dir / f"{topic}-0"


def segment_bases(broker: BrokerProcess, topic: str) -> list[int]:
    return sorted(
        int(path.name.split(".")[0]) for path in partition_dir(broker, topic).glob("*.log")
    )


def segment_sizes(broker: BrokerProcess, topic: str) -> list[int]:
    """Sizes of the `.log` files, oldest first (a file renamed meanwhile is left out)."""
    sizes = []
    for path in sorted(partition_dir(broker, topic).glob("*.log")):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            continue
    return sizes


def deleted_files(broker: BrokerProcess, topic: str) -> list[Path]:
    return list(partition_dir(broker, topic).glob("*.deleted"))


def consume_offsets(bootstrap: str, topic: str, count: int) -> list[int]:
    """Offsets of up to `count` records from the earliest offset on."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "retention-reader",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, -2)])
    offsets: list[int] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(offsets) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=count - len(offsets), timeout=0.5):
                if message.error() is None:
                    offsets.append(message.offset())
    finally:
        consumer.close()
    return offsets


def test_time_retention_removes_whole_old_segments_and_nothing_newer(broker) -> None:
    topic = "expiring"
    create_topic(broker.bootstrap, topic, config={**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS)})
    two_hours_ago = int(time.time() * 1000) - 2 * HOUR_MS
    produce_one_by_one(broker.bootstrap, topic, 20, timestamp_ms=two_hours_ago)
    first_new = 20
    produce_one_by_one(broker.bootstrap, topic, 10)
    # The segment holding the first new record also holds old ones: it must stay, with them.
    kept_base = max(base for base in segment_bases(broker, topic) if base <= first_new)
    assert kept_base > 0, "the old records should span several segments"

    # A pass that ran while the old records were produced removed only the segments rolled by
    # then; a later pass removes the rest. Wait for the old ones to be gone, then check that
    # nothing newer went with them.
    wait_for(
        lambda: watermarks(broker.bootstrap, topic, 0)[0] >= kept_base,
        "retention to remove every segment of old records only",
    )
    assert watermarks(broker.bootstrap, topic, 0) == (kept_base, 30)
    assert segment_bases(broker, topic)[0] == kept_base
    assert consume_offsets(broker.bootstrap, topic, 30 - kept_base) == list(range(kept_base, 30))


def test_size_retention_keeps_the_newest_segments_within_the_budget(broker) -> None:
    topic, budget = "bounded", 3000
    create_topic(broker.bootstrap, topic, config={**SMALL_SEGMENTS, "retention.bytes": str(budget)})
    produce_one_by_one(broker.bootstrap, topic, 40)

    def trimmed() -> bool:
        sizes = segment_sizes(broker, topic)
        return sum(sizes) - sizes[0] < budget

    wait_for(trimmed, "size retention")
    assert sum(segment_sizes(broker, topic)) >= budget
    start, end = watermarks(broker.bootstrap, topic, 0)
    assert (start, end) == (segment_bases(broker, topic)[0], 40)
    assert start > 0
    assert consume_offsets(broker.bootstrap, topic, 40 - start) == list(range(start, 40))


def test_deleted_segments_are_renamed_then_removed_after_the_delay(broker) -> None:
    topic = "delayed"
    config = {**SMALL_SEGMENTS, "retention.ms": str(HOUR_MS), "file.delete.delay.ms": "1500"}
    create_topic(broker.bootstrap, topic, config=config)
    produce_one_by_one(
        broker.bootstrap, topic, 12, timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS
    )
    produce_one_by_one(broker.bootstrap, topic, 1)

    wait_for(lambda: bool(deleted_files(broker, topic)), "renamed .deleted files")
    suffixes = {path.name.split(".", 1)[1] for path in deleted_files(broker, topic)}
    assert {"log.deleted", "index.deleted", "timeindex.deleted"} <= suffixes
    wait_for(lambda: not deleted_files(broker, topic), "the delayed removal")
    assert segment_bases(broker, topic)[0] == watermarks(broker.bootstrap, topic, 0)[0]


def delete_records_error(bootstrap: str, topic: str, offset: int) -> int:
    with pytest.raises(KafkaException) as raised:
        delete_records(bootstrap, topic, offset)
    return raised.value.args[0].code()


def first_consumer_error(bootstrap: str, topic: str, offset: int) -> KafkaError:
    """The error a consumer at `offset` that may not reset (auto.offset.reset=error) reports."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "strict", "auto.offset.reset": "error"}
    )
    consumer.assign([TopicPartition(topic, 0, offset)])
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for message in consumer.consume(1, 0.5):
                error = message.error()
                if error is not None:
                    return error
        raise AssertionError("the consumer reported no error")
    finally:
        consumer.close()


def test_delete_records_moves_the_low_watermark_and_fetches_below_it_fail(broker) -> None:
    topic = "trimmed"
    create_topic(broker.bootstrap, topic, config=SMALL_SEGMENTS)
    produce_one_by_one(broker.bootstrap, topic, 20)

    assert delete_records(broker.bootstrap, topic, 7) == 7
    assert watermarks(broker.bootstrap, topic, 0) == (7, 20)
    assert consume_offsets(broker.bootstrap, topic, 13) == list(range(7, 20))
    # A fetch below the start offset is OFFSET_OUT_OF_RANGE (here surfaced, not reset).
    error = first_consumer_error(broker.bootstrap, topic, 3)
    assert "Offset out of range" in str(error), error

    assert delete_records_error(broker.bootstrap, topic, 21) == KafkaError.OFFSET_OUT_OF_RANGE
    assert delete_records(broker.bootstrap, topic, OFFSET_END) == 20
    assert watermarks(broker.bootstrap, topic, 0) == (20, 20)
    # Then the next retention pass removes the segments wholly below the start.
    wait_for(lambda: segment_bases(broker, topic)[0] > 0, "segments below the start to go")
    assert all(base <= 20 for base in segment_bases(broker, topic))

    create_topic(broker.bootstrap, "compacted", config={"cleanup.policy": "compact"})
    assert delete_records_error(broker.bootstrap, "compacted", 0) == KafkaError.POLICY_VIOLATION


def test_delete_records_refuses_internal_and_unknown_partitions(broker) -> None:
    create_topic(broker.bootstrap, "one-partition")
    refused = {
        "__consumer_offsets": INVALID_TOPIC_EXCEPTION,
        "one-partition": UNKNOWN_TOPIC_OR_PARTITION,
        "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION,
    }
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, "a-group")  # creates __consumer_offsets
        for version in (0, 1):
            request = {
                "topics": [
                    {"name": name, "partitions": [{"partition_index": 1, "offset": -1}]}
                    for name in refused
                ],
                "timeout_ms": 1000,
            }
            answered = connection.send(DELETE_RECORDS, version, request).topics
            assert {
                t.name: [(p.error_code, p.low_watermark) for p in t.partitions] for t in answered
            } == {name: [(code, -1)] for name, code in refused.items()}
    finally:
        connection.close()


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        committer.close()


@pytest.mark.parametrize(("reset", "first_expected"), [("earliest", 15), ("latest", 20)])
def test_a_committed_offset_below_the_start_resets_per_auto_offset_reset(
    broker, reset: str, first_expected: int
) -> None:
    topic, group = f"reset-{reset}", f"group-{reset}"
    create_topic(broker.bootstrap, topic, config=SMALL_SEGMENTS)
    produce_one_by_one(broker.bootstrap, topic, 20)
    commit(broker.bootstrap, group, topic, 3)
    assert delete_records(broker.bootstrap, topic, 15) == 15

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    first: list[int] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while not first and time.monotonic() < deadline:
            # A consumer reset to the end sees only what comes after: keep records coming.
            if reset == "latest":
                producer.produce(topic, value=b"after the reset", partition=0)
                producer.flush(ADMIN_TIMEOUT_S)
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first.append(message.offset())
    finally:
        consumer.close()
    assert first, "the consumer received nothing"
    if reset == "earliest":
        assert first == [first_expected]
    else:
        assert first[0] >= first_expected


def test_the_log_start_offset_survives_a_kill_and_a_clean_restart(broker) -> None:
    topic = "durable-start"
    create_topic(broker.bootstrap, topic, config=SMALL_SEGMENTS)
    produce_one_by_one(broker.bootstrap, topic, 10)
    assert delete_records(broker.bootstrap, topic, 6) == 6
    broker.kill9()
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 0) == (6, 10)
    broker.stop()
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 0) == (6, 10)
    assert consume_offsets(broker.bootstrap, topic, 4) == [6, 7, 8, 9]


def test_kafkas_delete_records_and_get_offsets_tools(broker, tmp_path: Path) -> None:
    topic = "tool-trimmed"
    create_topic(broker.bootstrap, topic, config=SMALL_SEGMENTS)
    produce_one_by_one(broker.bootstrap, topic, 12)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 9}]})
    )

    deleted = tool_output(
        "org.apache.kafka.tools.DeleteRecordsCommand",
        "--bootstrap-server",
        broker.bootstrap,
        "--offset-json-file",
        str(offsets),
    )
    assert f"partition: {topic}-0\tlow_watermark: 9" in deleted, deleted
    earliest = tool_output(
        "org.apache.kafka.tools.GetOffsetShell",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--time",
        "earliest",
    )
    assert earliest.split() == [f"{topic}:0:9"]
