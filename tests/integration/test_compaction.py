"""The log cleaner, keyless records on compacted topics and `compression.type`, via clients."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from .broker_process import BrokerProcess
from .clients.confluent import assigned_consumer, create_topic, watermarks
from .kafka_cli import CONFIG_COMMAND, run_tool
from .wire import (
    array,
    connect,
    frame,
    int16,
    int32,
    read_response,
    record_batch,
    request_header,
    sized,
    string,
)

KEYS = 20
VERSIONS = 30
DELETED = {f"key-{i:02d}".encode() for i in range(0, KEYS, 5)}
# Small segments and a cleaner that looks often: a few seconds of cleaning.
CLEANER_OVERRIDES = {"log.cleaner.backoff.ms": "100"}
COMPACTED = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    # The active segment is never cleaned: a later record rolls it after a second.
    "segment.ms": "1000",
}
ROLL_WAIT_S = 1.2
MARKER = b"marker"
API_PRODUCE = 0
INVALID_RECORD = 87
CLEAN_TIMEOUT_S = 60.0


def produce_versions(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """Every key written VERSIONS times, then every fifth key deleted; the expected latest."""
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "compression.type": "lz4",
            # Batches well below the 4 KiB segments.
            "batch.num.messages": 20,
        }
    )
    latest: dict[bytes, bytes | None] = {}
    for version in range(VERSIONS):
        for i in range(KEYS):
            key = f"key-{i:02d}".encode()
            value = f"{key.decode()}-version-{version:03d}-{'x' * 40}".encode()
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
            latest[key] = value
        producer.poll(0)
    for key in sorted(DELETED):
        producer.produce(topic, key=key, value=None, partition=0, on_delivery=on_delivery)
        latest[key] = None
    # One more round of live keys so the tombstones leave the active segment.
    for i in range(KEYS):
        key = f"key-{i:02d}".encode()
        if key not in DELETED:
            value = f"{key.decode()}-final-{'y' * 40}".encode()
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
            latest[key] = value
    assert producer.flush(60) == 0
    time.sleep(ROLL_WAIT_S)
    producer.produce(topic, key=MARKER, value=b"rolls", partition=0, on_delivery=on_delivery)
    latest[MARKER] = b"rolls"
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return latest


def read_from_start(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 from the log start to the current end."""
    _, end = watermarks(bootstrap, topic, 0)
    consumer = assigned_consumer(bootstrap, topic, 0)
    seen: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 30
    try:
        while (not seen or seen[-1][0] < end - 1) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert seen and seen[-1][0] == end - 1, f"read up to {seen[-1:]} of {end}"
    return seen


def is_compacted(seen: list[tuple[int, bytes, bytes | None]]) -> bool:
    """Each live key once, and no deleted key (its tombstone gone too)."""
    keys = [key for _, key, _ in seen]
    return len(keys) == len(set(keys)) and not DELETED & set(keys)


def wait_until_compacted(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    seen = read_from_start(bootstrap, topic)
    while not is_compacted(seen) and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = read_from_start(bootstrap, topic)
    return seen


def assert_latest_values(
    seen: list[tuple[int, bytes, bytes | None]], latest: dict[bytes, bytes | None]
) -> None:
    assert is_compacted(seen), f"{len(seen)} records, keys {sorted({k for _, k, _ in seen})}"
    offsets = [offset for offset, _, _ in seen]
    assert offsets == sorted(offsets)
    assert {key: value for _, key, value in seen} == live(latest)


def test_the_cleaner_keeps_the_latest_value_per_key_and_drops_deleted_keys(
    broker_factory,
) -> None:
    broker = broker_factory(CLEANER_OVERRIDES)
    create_topic(broker.bootstrap, "compacted", config=COMPACTED)
    latest = produce_versions(broker.bootstrap, "compacted")
    _, end = watermarks(broker.bootstrap, "compacted", 0)
    assert end == KEYS * VERSIONS + KEYS + 1

    seen = wait_until_compacted(broker.bootstrap, "compacted")
    assert_latest_values(seen, latest)
    checkpoint = (broker.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    assert checkpoint[:2] == ["0", "1"] and checkpoint[2].startswith("compacted 0 ")


def partition_files(broker: BrokerProcess, topic: str, suffix: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob(f"*{suffix}"))


def test_kill_9_mid_clean_then_restart_gives_the_same_result(broker_factory) -> None:
    # A slow cleaner (Kafka's io.max.bytes.per.second throttle) so the kill lands mid-clean.
    broker = broker_factory({**CLEANER_OVERRIDES, "log.cleaner.io.max.bytes.per.second": "20000"})
    create_topic(broker.bootstrap, "crashed", config=COMPACTED)
    latest = produce_versions(broker.bootstrap, "crashed")
    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    while not partition_files(broker, "crashed", ".cleaned") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert partition_files(broker, "crashed", ".cleaned"), "the cleaner never started writing"
    broker.kill9()

    # Loaded with the cleaner off: the interrupted clean was undone or finished, nothing lost.
    broker.overrides.pop("log.cleaner.io.max.bytes.per.second")
    broker.overrides["log.cleaner.enable"] = "false"
    broker.restart()
    assert not partition_files(broker, "crashed", ".cleaned")
    assert not partition_files(broker, "crashed", ".swap")
    assert replayed(read_from_start(broker.bootstrap, "crashed")) == live(latest)

    broker.kill9()
    broker.overrides["log.cleaner.enable"] = "true"
    broker.restart()
    seen = wait_until_compacted(broker.bootstrap, "crashed")
    assert_latest_values(seen, latest)


def live(latest: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {key: value for key, value in latest.items() if value is not None}


def replayed(seen: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, bytes]:
    """What a reader applying every record in order ends up with."""
    state: dict[bytes, bytes] = {}
    for _, key, value in seen:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def produce_v8(
    broker: BrokerProcess, topic: str, batches: dict[int, bytes]
) -> dict[int, tuple[int, list[tuple[int, str | None]], str | None]]:
    """One Produce v8 request (acks=1): per partition, the error code, the record errors
    (batch index, message) and the error message."""
    partition_data = [int32(partition) + sized(batch) for partition, batch in batches.items()]
    body = string(None) + int16(1) + int32(10_000) + array([string(topic) + array(partition_data)])
    with connect("127.0.0.1", broker.port) as sock:
        sock.sendall(frame(request_header(API_PRODUCE, 8, 7) + body))
        reader = read_response(sock, 7)
    results = {}
    for _ in range(reader.int32()):
        reader.string()
        for _ in range(reader.int32()):
            partition = reader.int32()
            error_code = reader.int16()
            reader.int64()  # base offset
            reader.int64()  # log append time
            reader.int64()  # log start offset
            record_errors = [(reader.int32(), reader.string()) for _ in range(reader.int32())]
            results[partition] = (error_code, record_errors, reader.string())
    return results


def test_a_compacted_topic_refuses_keyless_records_and_keeps_the_other_partitions(
    broker,
) -> None:
    create_topic(broker.bootstrap, "keyed", partitions=2, config={"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keyless = record_batch([(b"k", b"kept?"), (None, b"no key"), (b"k2", b"v")], now)
    keyed = record_batch([(b"k", b"v")], now)
    results = produce_v8(broker, "keyed", {0: keyless, 1: keyed})

    error_code, record_errors, message = results[0]
    assert error_code == INVALID_RECORD
    assert record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition keyed-0")
    ]
    assert message is not None and message.startswith(
        "One or more records have been rejected due to 1 record errors in total"
    )
    assert results[1] == (0, [], None)
    assert watermarks(broker.bootstrap, "keyed", 0) == (0, 0)
    assert watermarks(broker.bootstrap, "keyed", 1) == (0, 1)


def stored_codecs(segment: Path) -> list[int]:
    """The compression codec id of every batch in a segment file."""
    data = segment.read_bytes()
    codecs, position = [], 0
    while position + 61 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        (attributes,) = struct.unpack_from(">h", data, position + 21)
        codecs.append(attributes & 0x07)
        position += 12 + length
    return codecs


def test_a_gzip_topic_stores_gzip_batches_whatever_the_producer_sends(broker) -> None:
    create_topic(broker.bootstrap, "zipped", config={"compression.type": "gzip"})
    create_topic(broker.bootstrap, "as-sent")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5}
    )
    for topic in ("zipped", "as-sent"):
        for i in range(200):
            producer.produce(topic, key=f"k{i}".encode(), value=b"v" * 100, partition=0)
    assert producer.flush(30) == 0

    gzip, lz4 = 1, 3
    zipped = stored_codecs(partition_files(broker, "zipped", ".log")[0])
    as_sent = stored_codecs(partition_files(broker, "as-sent", ".log")[0])
    assert zipped and set(zipped) == {gzip}
    assert as_sent and set(as_sent) == {lz4}
    consumer = assigned_consumer(broker.bootstrap, "zipped", 0)
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 200 and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(200, timeout=0.5) if not m.error()]
    finally:
        consumer.close()
    assert values == [b"v" * 100] * 200


def test_consumer_offsets_is_cleaned_and_the_group_coordinator_reloads_it(broker_factory) -> None:
    broker = broker_factory(
        {
            **CLEANER_OVERRIDES,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": "1048576",
        }
    )
    partitions = 100
    create_topic(broker.bootstrap, "tracked", partitions=partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "committer",
            "enable.auto.commit": False,
        }
    )
    try:
        # ~80 bytes a committed offset: a few MiB, so __consumer_offsets rolls 1 MiB segments.
        for round_ in range(400):
            offsets = [TopicPartition("tracked", p, round_ * 10 + p) for p in range(partitions)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    final = {p: 399 * 10 + p for p in range(partitions)}

    def cleaned() -> bool:
        checkpoint = broker.data_dir / "cleaner-offset-checkpoint"
        return checkpoint.exists() and "__consumer_offsets 0 " in checkpoint.read_text()

    deadline = time.monotonic() + CLEAN_TIMEOUT_S
    while not cleaned() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cleaned(), "__consumer_offsets-0 was never cleaned"
    log_files = partition_files(broker, "__consumer_offsets", ".log")
    log_bytes = sum(f.stat().st_size for f in log_files)
    assert log_bytes < 1048576 * 2, f"{log_bytes} bytes left after cleaning"

    broker.kill9()
    broker.restart()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer"})
    try:
        asked = [TopicPartition("tracked", p) for p in range(partitions)]
        committed = reader.committed(asked, timeout=30)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in committed} == final


def test_a_broker_wide_compact_policy_leaves_the_metadata_log_alone(broker_factory) -> None:
    broker = broker_factory({**CLEANER_OVERRIDES, "log.cleanup.policy": "compact"})
    create_topic(broker.bootstrap, "inherits", config={"internal.segment.bytes": "4096"})
    latest = produce_versions(broker.bootstrap, "inherits")
    for _ in range(2):
        # Its keyless metadata records survive the cleaner and every reload.
        broker.kill9()
        broker.restart()
        assert watermarks(broker.bootstrap, "inherits", 0)[1] == KEYS * VERSIONS + KEYS + 1
    assert replayed(read_from_start(broker.bootstrap, "inherits")) == live(latest)


def cleaner_threads(pid: int) -> int:
    """The broker's threads named by Kafka's `kafka-log-cleaner-thread-N` (a thread's name is
    cut to 15 characters in /proc)."""
    names = (task.read_text().strip() for task in Path(f"/proc/{pid}/task").glob("*/comm"))
    return sum(1 for name in names if name.startswith("kafka-log-clean"))


@pytest.mark.parametrize(
    ("overrides", "threads"),
    [
        ({"log.cleaner.threads": "2"}, 2),
        ({"log.cleaner.threads": "0"}, 0),
        ({"log.cleaner.enable": "false"}, 0),
    ],
)
def test_log_cleaner_threads_and_enable_decide_the_cleaner_threads(
    broker_factory, overrides: dict[str, str], threads: int
) -> None:
    broker = broker_factory(overrides)
    assert cleaner_threads(broker.pid) == threads


def alter_broker_config(bootstrap: str, entity: str, config: str) -> tuple[int, str]:
    """kafka-configs --entity-type brokers --alter --add-config `config` on `entity` (a broker
    id, or --entity-default); its exit code and output."""
    target = ["--entity-default"] if entity == "" else ["--entity-name", entity]
    args = ["--entity-type", "brokers", *target, "--alter", "--add-config", config]
    done = run_tool(CONFIG_COMMAND, bootstrap, *args)
    return done.returncode, done.stdout + done.stderr


def wait_for_cleaner_threads(pid: int, wanted: int) -> None:
    deadline = time.monotonic() + 10
    while cleaner_threads(pid) != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cleaner_threads(pid) == wanted


def test_kafka_configs_changes_the_cleaner_threads_live_and_compaction_goes_on(
    broker_factory,
) -> None:
    broker = broker_factory(CLEANER_OVERRIDES)
    assert cleaner_threads(broker.pid) == 1

    assert alter_broker_config(broker.bootstrap, "", "log.cleaner.threads=2")[0] == 0
    wait_for_cleaner_threads(broker.pid, 2)
    assert alter_broker_config(broker.bootstrap, "1", "log.cleaner.threads=4")[0] == 0
    wait_for_cleaner_threads(broker.pid, 4)
    # Kafka's bounds: from half to double the threads in force.
    status, output = alter_broker_config(broker.bootstrap, "1", "log.cleaner.threads=9")
    assert status != 0
    assert "cannot be increased to more than double the current value 4" in output
    assert (
        alter_broker_config(broker.bootstrap, "", "log.cleaner.io.max.bytes.per.second=1e9")[0] == 0
    )
    assert cleaner_threads(broker.pid) == 4

    create_topic(broker.bootstrap, "compacted-after", config=COMPACTED)
    latest = produce_versions(broker.bootstrap, "compacted-after")
    assert_latest_values(wait_until_compacted(broker.bootstrap, "compacted-after"), latest)

    # The dynamic value is the one in force after a restart too.
    broker.stop()
    broker.restart()
    wait_for_cleaner_threads(broker.pid, 4)
