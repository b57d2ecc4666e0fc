"""Many partitions within a small open-file limit: each partition may hold one descriptor (its
active segment's `.log`), as in Kafka, not one per index file too."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from .clients.confluent import UNUSED_GROUP_ID, create_topic

TOPIC = "many"
PARTITIONS = 300
# Room for one descriptor a partition plus sockets and the interpreter's own files; three
# descriptors a partition (900) would not fit.
OPEN_FILE_LIMIT = 512


def produce_one_record_each(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, value=f"record-{partition}".encode(), partition=partition)
    assert producer.flush(60) == 0, "records left undelivered"


def read_one_record_each(bootstrap: str) -> dict[int, bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": UNUSED_GROUP_ID,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in range(PARTITIONS)])
    read: dict[int, bytes] = {}
    try:
        for _ in range(120):
            for message in consumer.consume(num_messages=PARTITIONS, timeout=0.5):
                if message.error() is None:
                    read[message.partition()] = message.value()
            if len(read) == PARTITIONS:
                break
    finally:
        consumer.close()
    return read


def test_hundreds_of_partitions_fit_a_small_open_file_limit(broker_factory) -> None:
    broker = broker_factory(open_file_limit=OPEN_FILE_LIMIT)
    create_topic(broker.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_one_record_each(broker.bootstrap)
    expected = {partition: f"record-{partition}".encode() for partition in range(PARTITIONS)}
    assert read_one_record_each(broker.bootstrap) == expected

    # Recovery after kill -9 opens every partition's files again.
    broker.kill9()
    broker.restart()
    assert read_one_record_each(broker.bootstrap) == expected
