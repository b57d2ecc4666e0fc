"""kill -9 in the middle of idempotent acks=all produces loses no acknowledged record."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Message, Producer

from .clients.confluent import assigned_consumer, create_topic, poll_records, watermarks

TOPIC = "crash"
CHUNK_SIZE = 50
KILL_AFTER_ACKED = 600
# Chunks produced while the broker is down (they wait in the producer) and after the restart.
CHUNKS_WHILE_DOWN = 3
CHUNKS_AFTER_RESTART = 10
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


class AckTracker:
    """An idempotent acks=all producer of numbered records, remembering each delivery report."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 20,
                "message.timeout.ms": 90_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self.sent = 0
        self.acked: dict[bytes, int] = {}  # value -> offset
        self.failed: list[KafkaError] = []
        acked, failed = self.acked, self.failed

        # A closure over the lists, not a bound method: the producer holding a reference back
        # to this object would keep both alive (and reconnecting) after the test.
        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is None:
                acked[message.value()] = message.offset()
            else:
                failed.append(error)

        self._on_delivery = on_delivery

    def produce_chunk(self) -> None:
        for _ in range(CHUNK_SIZE):
            value = f"record-{self.sent:06d}".encode()
            self.producer.produce(TOPIC, value=value, partition=0, on_delivery=self._on_delivery)
            self.sent += 1
        self.producer.poll(0.02)


def test_kill_9_mid_stream_loses_no_acknowledged_record(broker) -> None:
    create_topic(broker.bootstrap, TOPIC)
    stream = AckTracker(broker.bootstrap)
    deadline = time.monotonic() + 60
    while len(stream.acked) < KILL_AFTER_ACKED and time.monotonic() < deadline:
        stream.produce_chunk()
    assert len(stream.acked) >= KILL_AFTER_ACKED, f"only {len(stream.acked)} acknowledged in 60 s"

    broker.kill9()
    acked_before_kill = len(stream.acked)
    assert stream.sent > acked_before_kill, "the kill did not hit records in flight"
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    for _ in range(CHUNKS_WHILE_DOWN):
        stream.produce_chunk()
    broker.restart()
    for _ in range(CHUNKS_AFTER_RESTART):
        stream.produce_chunk()
    assert stream.producer.flush(120) == 0, "records neither delivered nor failed within 120 s"

    _, end = watermarks(broker.bootstrap, TOPIC, 0)
    consumer = assigned_consumer(broker.bootstrap, TOPIC, 0)
    try:
        stored = poll_records(consumer, end, timeout_s=60)
    finally:
        consumer.close()
    values = [c.record.value for c in stored]
    assert [c.offset for c in stored] == list(range(end)), "offsets are not contiguous from 0"
    assert len(set(values)) == len(values), "the idempotent producer's retries were duplicated"
    assert values == sorted(values), "records are stored out of the order they were produced in"
    offsets_by_value = {c.record.value: c.offset for c in stored}
    lost = [value for value in stream.acked if value not in offsets_by_value]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:3]}"
    misplaced = [v for v, offset in stream.acked.items() if offsets_by_value[v] != offset]
    assert not misplaced, f"stored at another offset than acknowledged: {misplaced[:3]}"
    assert len(stream.acked) > acked_before_kill, "nothing was acknowledged after the restart"
    assert not stream.failed, f"{len(stream.failed)} deliveries failed: {stream.failed[:3]}"
