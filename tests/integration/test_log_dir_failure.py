"""A committed metadata change the core cannot apply (here: out of file descriptors) takes the
log dir offline, as Kafka does; with its only log dir offline the broker stops with a clear
message instead of serving half-applied metadata, and a restart serves the topic."""

from __future__ import annotations

import contextlib

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic

from .clients.confluent import admin_client, partition_count

TOPIC = "wide"
PARTITIONS = 600
# Enough for start-up, not for one descriptor per partition of TOPIC.
OPEN_FILE_LIMIT = 256
EXIT_TIMEOUT_S = 60


def request_topic(bootstrap: str) -> None:
    """CreateTopics; the broker may stop before it answers, so the outcome is not asserted."""
    admin = admin_client(bootstrap)
    future = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)])[TOPIC]
    with contextlib.suppress(KafkaException):
        future.result(EXIT_TIMEOUT_S)


def test_running_out_of_descriptors_takes_the_log_dir_offline(broker_factory) -> None:
    broker = broker_factory(open_file_limit=OPEN_FILE_LIMIT)
    data_dir = broker.overrides["log.dirs"]
    request_topic(broker.bootstrap)

    assert broker.wait_exit(EXIT_TIMEOUT_S) == 1
    stderr = broker.stderr_text()
    offline = [line for line in stderr.splitlines() if "log dir is offline" in line]
    assert len(offline) == 1, stderr[-4000:]
    assert data_dir in offline[0] and "Too many open files" in offline[0]
    assert f"every log dir has failed ({data_dir})" in stderr

    broker.open_file_limit = None
    broker.restart()
    assert partition_count(broker.bootstrap, TOPIC) == PARTITIONS
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    failures: list[object] = []
    for partition in range(PARTITIONS):
        producer.produce(
            TOPIC,
            value=b"after restart",
            partition=partition,
            on_delivery=lambda error, _: failures.append(error) if error else None,
        )
    assert producer.flush(60) == 0
    assert failures == []
