"""A clean stop (SIGTERM, exit 0) and restart keeps every topic, its id, and all its data."""

from __future__ import annotations

from .clients import CLIENTS_BY_NAME, consume_all, produce_samples
from .clients.confluent import create_topic, partition_count, topic_id, watermarks
from .groups_support import wait_until
from .records import assert_read_back

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
confluent = CLIENTS_BY_NAME["confluent-kafka"]
kafka_python = CLIENTS_BY_NAME["kafka-python"]


def test_clean_restart_keeps_topics_ids_and_records(broker) -> None:
    create_topic(broker.bootstrap, "kept-single")
    create_topic(broker.bootstrap, "kept-multi", partitions=3, config={"retention.ms": "-1"})
    ids_before = {
        topic: topic_id(broker.bootstrap, topic) for topic in ("kept-single", "kept-multi")
    }
    single = produce_samples(confluent, broker.bootstrap, "kept-single", count=50, codec="zstd")
    multi = produce_samples(
        kafka_python, broker.bootstrap, "kept-multi", count=20, codec="gzip", partition=2
    )

    broker.stop()
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.restart()

    assert {topic: topic_id(broker.bootstrap, topic) for topic in ids_before} == ids_before
    assert partition_count(broker.bootstrap, "kept-multi") == 3
    assert_read_back(single, consume_all(confluent, broker.bootstrap, "kept-single", 50))
    assert_read_back(multi, consume_all(confluent, broker.bootstrap, "kept-multi", 20, partition=2))
    assert watermarks(broker.bootstrap, "kept-multi", 0) == (0, 0)


def test_appends_after_restart_continue_at_the_next_offset(broker) -> None:
    create_topic(broker.bootstrap, "continued")
    before = produce_samples(confluent, broker.bootstrap, "continued", count=10, codec="lz4")
    broker.stop()
    broker.restart()

    after = produce_samples(kafka_python, broker.bootstrap, "continued", count=10, codec="snappy")

    consumed = consume_all(confluent, broker.bootstrap, "continued", 20)
    assert_read_back(before, consumed[:10])
    assert_read_back(after, consumed[10:], base_offset=10)
    assert watermarks(broker.bootstrap, "continued", 0) == (0, 20)


def test_high_watermarks_are_checkpointed_every_interval_and_kept_by_a_restart(
    broker_factory,
) -> None:
    broker = broker_factory({"replica.high.watermark.checkpoint.interval.ms": "100"})
    create_topic(broker.bootstrap, "hw-kept")
    checkpoint = broker.data_dir / HIGH_WATERMARK_CHECKPOINT

    def checkpointed(high_watermark: int) -> bool:
        return checkpoint.exists() and f"hw-kept 0 {high_watermark}" in checkpoint.read_text()

    # Two rounds, each seen in the file within 3 s of its produce: a 100 ms interval does it,
    # the 5 s default cannot do both.
    produced = []
    for round_end in (5, 10):
        produced.append(
            produce_samples(confluent, broker.bootstrap, "hw-kept", count=5, codec="none")
        )
        wait_until(lambda end=round_end: checkpointed(end), 3, f"the checkpoint at {round_end}")
    broker.stop()
    # Kafka's layout: version 0, the entry count, then "topic partition offset" lines.
    version, count, *entries = checkpoint.read_text().splitlines()
    assert (version, int(count)) == ("0", len(entries)) and "hw-kept 0 10" in entries
    broker.restart()

    assert watermarks(broker.bootstrap, "hw-kept", 0) == (0, 10)
    consumed = consume_all(confluent, broker.bootstrap, "hw-kept", 10)
    assert_read_back(produced[0], consumed[:5])
    assert_read_back(produced[1], consumed[5:], base_offset=5)
