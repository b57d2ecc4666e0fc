"""Kafka's own DumpLogSegments reads what krust wrote: every batch valid, offsets contiguous
across segments, and every offset and time index entry pointing at the right batch."""

from __future__ import annotations

import re
import time
from pathlib import Path

from confluent_kafka import Producer

from .clients.confluent import create_topic
from .kafka_cli import DUMP_LOG_SEGMENTS, tool_output

TOPIC = "dumped"
# Kafka 4's smallest log.segment.bytes: a few MB of records make several segments.
SEGMENT_BYTES = 1024 * 1024
RECORDS_BEFORE_KILL = 20_000
RECORDS_AFTER_RESTART = 10_000
# How long a transaction marker may take to reach the log after the commit returns.
MARKER_WAIT_S = 10.0


def produce(bootstrap: str, first: int, count: int) -> None:
    """Many small batches, so indexes get entries; values carry their record number."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 50})
    for number in range(first, first + count):
        producer.produce(TOPIC, value=f"record-{number:08d}-".encode() * 8, partition=0)
        if number % 500 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0, "records left undelivered"


def dump(files: list[Path], *flags: str) -> str:
    return tool_output(DUMP_LOG_SEGMENTS, "--files", ",".join(str(path) for path in files), *flags)


def test_kafkas_dump_log_segments_verifies_krusts_segments_and_indexes(broker_factory) -> None:
    broker = broker_factory({"log.segment.bytes": str(SEGMENT_BYTES)})
    create_topic(broker.bootstrap, TOPIC)
    produce(broker.bootstrap, 0, RECORDS_BEFORE_KILL)
    # The active segment's indexes are then rebuilt by recovery, the rest as written.
    broker.kill9()
    broker.restart()
    produce(broker.bootstrap, RECORDS_BEFORE_KILL, RECORDS_AFTER_RESTART)
    broker.stop()

    partition_dir = broker.data_dir / f"{TOPIC}-0"
    logs = sorted(partition_dir.glob("*.log"))
    assert len(logs) >= 3, "expected several segments"
    records = dump(logs, "--deep-iteration")
    offsets = [int(found) for found in re.findall(r"^\| offset: (\d+)", records, re.MULTILINE)]
    assert offsets == list(range(RECORDS_BEFORE_KILL + RECORDS_AFTER_RESTART))
    batches = re.findall(r"^baseOffset: .* isvalid: (\w+)", records, re.MULTILINE)
    assert batches and set(batches) == {"true"}
    # The tool reports each later segment's first offset as following -1, for Kafka's own
    # segments too; any other pair would be a gap.
    gaps = re.findall(r"^\s+(-?\d+) is followed by \d+", records, re.MULTILINE)
    assert set(gaps) <= {"-1"}

    indexes = sorted(partition_dir.glob("*.index")) + sorted(partition_dir.glob("*.timeindex"))
    assert len(indexes) == 2 * len(logs)
    assert any(path.stat().st_size > 0 for path in indexes), "no index entries were written"
    # A segment whose batches never spanned index.interval.bytes has an empty offset index,
    # in Kafka too; the tool reports it as empty instead of checking it.
    empty = [path for path in indexes if path.stat().st_size == 0]
    checked = dump(indexes, "--index-sanity-check")
    assert checked.count("passed sanity check") == len(indexes) - len(empty)
    assert checked.count(" is empty.") == len(empty)
    verified = dump(indexes, "--verify-index-only")
    assert "Mismatches" not in verified
    assert "not found" not in verified


def test_kafkas_dump_log_segments_reads_markers_and_the_aborted_transaction_index(
    broker_factory,
) -> None:
    """An aborted and a committed transaction: DumpLogSegments shows both markers as control
    records and reads the `.txnindex` entry of the aborted one."""
    broker = broker_factory()
    topic = "dumped-transactions"
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dumped"})
    producer.init_transactions(30)
    for commit in (False, True):
        producer.begin_transaction()
        for number in range(3):
            producer.produce(topic, value=b"%d" % number, partition=0)
        # On the broker before the transaction ends (an abort drops what is still queued).
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    (segment,) = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    # The commit returns once the coordinator has logged PrepareCommit; the marker follows it
    # (as in Kafka), so the dump may come first: dump again until it is there or time is up.
    deadline = time.monotonic() + MARKER_WAIT_S
    while True:
        records = dump([segment], "--print-data-log")
        markers = re.findall(r"endTxnMarker: (\w+) coordinatorEpoch: \d+", records)
        if len(markers) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert markers == ["ABORT", "COMMIT"], records
    # Offsets 0-2 aborted, their marker at 3, then 4-6 committed and their marker at 7.
    entries = dump([segment.with_suffix(".txnindex")])
    assert re.search(
        r"producerId: \d+ firstOffset: 0 lastOffset: 3 lastStableOffset: 4", entries
    ), entries
