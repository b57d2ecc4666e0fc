"""krust._core's native Kafka client (what the Spark data source runs on), driven directly:
metadata, offsets, Arrow batches out of a Fetch and into a Produce, and its errors."""

from __future__ import annotations

import pyarrow as pa
import pytest
from krust._core import DataLossError, KafkaClient, KafkaClientError, PartitionReader

from .broker_process import BrokerProcess
from .clients.confluent import (
    ConfluentKafkaClient,
    assigned_consumer,
    create_topic,
    delete_records,
    poll_records,
)
from .records import Record


def read_all(reader: PartitionReader) -> pa.Table:
    batches = []
    while (batch := reader.next_batch()) is not None:
        batches.append(pa.record_batch(batch))
    return pa.Table.from_batches(batches)


def test_offsets_and_a_range_read_as_arrow(module_broker: BrokerProcess) -> None:
    bootstrap, topic = module_broker.bootstrap, "native-read"
    create_topic(bootstrap, topic, partitions=2)
    records = [
        Record(f"k{i}".encode(), f"v{i}".encode(), (("h", b"1"), ("h", b"2")), 1_000 * (i + 1))
        for i in range(10)
    ]
    ConfluentKafkaClient().produce(bootstrap, topic, 1, records, "lz4")

    client = KafkaClient(bootstrap)
    assert dict(client.partition_counts([topic, "native-no-such-topic"])) == {topic: 2}
    assert client.list_offsets(topic, [0, 1], "earliest") == [0, 0]
    assert client.list_offsets(topic, [0, 1], "latest") == [0, 10]
    assert client.list_offsets(topic, [1], 4_500) == [4]
    assert client.list_offsets(topic, [1], 99_000) == [None]

    table = read_all(PartitionReader(bootstrap, topic, 1, 3, 7, include_headers=True))
    assert table.column("offset").to_pylist() == [3, 4, 5, 6]
    assert table.column("value").to_pylist() == [b"v3", b"v4", b"v5", b"v6"]
    assert table.column("partition").to_pylist() == [1] * 4
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [
        4_000_000,
        5_000_000,
        6_000_000,
        7_000_000,
    ]
    assert table.column("headers").to_pylist()[0] == [
        {"key": "h", "value": b"1"},
        {"key": "h", "value": b"2"},
    ]


def test_an_arrow_batch_is_produced_and_read_by_a_kafka_consumer(
    module_broker: BrokerProcess,
) -> None:
    bootstrap, topic = module_broker.bootstrap, "native-produce"
    create_topic(bootstrap, topic)
    batch = pa.record_batch(
        {
            "key": pa.array([b"a", None, b"c"], pa.binary()),
            "value": pa.array(["1", "2", None], pa.string()),
        }
    )
    assert KafkaClient(bootstrap).produce(batch, topic, acks="all", compression="gzip") == 3

    consumer = assigned_consumer(bootstrap, topic, 0)
    try:
        consumed = poll_records(consumer, 4, timeout_s=5.0)
    finally:
        consumer.close()
    assert [(c.record.key, c.record.value) for c in consumed] == [
        (b"a", b"1"),
        (None, b"2"),
        (b"c", None),
    ]


def test_reading_deleted_offsets_is_data_loss(module_broker: BrokerProcess) -> None:
    bootstrap, topic = module_broker.bootstrap, "native-deleted"
    create_topic(bootstrap, topic)
    ConfluentKafkaClient().produce(
        bootstrap, topic, 0, [Record(None, str(i).encode()) for i in range(6)], "none"
    )
    assert delete_records(bootstrap, topic, 4) == 4
    with pytest.raises(DataLossError, match=r"the log now starts at 4"):
        read_all(PartitionReader(bootstrap, topic, 0, 1, 6))


def test_bad_calls_say_what_is_wrong(module_broker: BrokerProcess) -> None:
    bootstrap = module_broker.bootstrap
    client = KafkaClient(bootstrap)
    batch = pa.record_batch({"value": pa.array([b"x"])})
    with pytest.raises(ValueError, match="acks must be all"):
        client.produce(batch, "t", acks="0")
    with pytest.raises(ValueError, match="compression must be one of"):
        client.produce(batch, "t", compression="brotli")
    with pytest.raises(KafkaClientError, match="value column is missing"):
        client.produce(pa.record_batch({"key": pa.array([b"k"])}), "t")
    with pytest.raises(KafkaClientError, match="give a topic column or the topic option"):
        client.produce(batch)
    with pytest.raises(ValueError, match="is not a valid range"):
        PartitionReader(bootstrap, "t", 0, 5, 2)
    with pytest.raises(ValueError, match="offset spec must be"):
        client.list_offsets("t", [0], "newest")
    with pytest.raises(KafkaClientError, match="topic native-missing does not exist"):
        client.list_offsets("native-missing", [0], "latest")
    with pytest.raises(KafkaClientError, match="no bootstrap server given"):
        KafkaClient(" , ")
