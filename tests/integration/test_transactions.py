"""Exactly-once with real clients (confluent-kafka, kafka-python, the Java client; KIP-98,
KIP-447, KIP-890) on one broker: a transaction's records become visible to read_committed
consumers all at once on commit and never on abort; consume-transform-produce moves the input
group's offsets only with the output's commit; a second producer with the same
transactional.id fences the first; a silent transaction is aborted by the broker; bad
transactional requests get Kafka's error codes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from kafka import KafkaProducer
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from . import kafka_api
from .broker_process import BrokerProcess, shared_broker
from .clients import java
from .clients.confluent import create_topic
from .records import now_ms

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    # The broker's sweep for transactions past their timeout (Kafka's default is 10 s).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
READ_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from shared_broker(tmp_path_factory.mktemp("transactions"), OVERRIDES)


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions=partitions)
    return name


def transactional_producer(
    broker: BrokerProcess, transactional_id: str, **config: object
) -> Producer:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id, **config}
    )
    producer.init_transactions(30)
    return producer


def reader(broker: BrokerProcess, topic: str, partitions: int, committed: bool) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


def read_values(
    consumer: Consumer, until: bytes | None = None, wait_s: float = 2.0, times: int = 1
) -> list[bytes]:
    """Values delivered: until the `until` value arrived `times` times, or for `wait_s`
    seconds."""
    values: list[bytes] = []
    deadline = time.monotonic() + (READ_S if until is not None else wait_s)
    while time.monotonic() < deadline:
        for message in consumer.consume(num_messages=100, timeout=0.2):
            if message.error() is None:
                values.append(message.value() or b"")
        if until is not None and values.count(until) >= times:
            break
    return values


def sentinel(broker: BrokerProcess, topic: str, partitions: int) -> bytes:
    """A plain record on every partition: a read_committed reader that sees them has read
    past every transaction before them (the last stable offset passed them)."""
    value = f"sentinel-{uuid.uuid4().hex[:6]}".encode()
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(partitions):
        plain.produce(topic, value, partition=partition)
    assert plain.flush(30) == 0
    return value


def committed_values(broker: BrokerProcess, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed reader gets before a sentinel written now on each
    partition: what is committed, once every earlier transaction has ended."""
    end = sentinel(broker, topic, partitions)
    committed = reader(broker, topic, partitions, True)
    try:
        values = read_values(committed, until=end, times=partitions)
    finally:
        committed.close()
    return [value for value in values if value != end]


def test_a_commit_shows_every_record_of_the_transaction_at_once(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    producer = transactional_producer(broker, f"commit-{topic}")
    committed, uncommitted = reader(broker, topic, 2, True), reader(broker, topic, 2, False)
    try:
        producer.begin_transaction()
        sent = [f"r{i}".encode() for i in range(10)]
        for i, value in enumerate(sent):
            producer.produce(topic, value, partition=i % 2)
        assert producer.flush(30) == 0
        # On the broker, in an open transaction: read_uncommitted sees it, read_committed not.
        end = sentinel(broker, topic, 2)
        assert sorted(read_values(uncommitted, until=end, times=2)) == sorted([*sent, end, end])
        assert read_values(committed) == []
        producer.commit_transaction(30)
        after = read_values(committed, until=end, times=2)
        assert sorted(v for v in after if v.startswith(b"r")) == sorted(sent)
        # In order per partition.
        assert [v for v in after if v in sent[0::2]] == sent[0::2]
    finally:
        committed.close()
        uncommitted.close()


def test_an_abort_shows_nothing_to_read_committed(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    producer = transactional_producer(broker, f"abort-{topic}")
    producer.begin_transaction()
    aborted = [f"a{i}".encode() for i in range(6)]
    for i, value in enumerate(aborted):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"kept", partition=0)
    producer.commit_transaction(30)
    end = sentinel(broker, topic, 2)
    committed, uncommitted = reader(broker, topic, 2, True), reader(broker, topic, 2, False)
    try:
        assert sorted(read_values(committed, until=end, times=2)) == sorted([b"kept", end, end])
        seen = read_values(uncommitted, until=end, times=2)
        assert set(aborted) <= set(seen) and b"kept" in seen
    finally:
        committed.close()
        uncommitted.close()


def test_kafka_python_transactions_commit_and_abort(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=1)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=f"kafka-python-{topic}"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"dropped", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)
    assert committed_values(broker, topic, 1) == [b"committed"]


def test_java_client_transactions_commit_and_abort(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=1)
    java.transact(broker.bootstrap, topic, f"java-{topic}", [b"dropped"], commit=False)
    java.transact(broker.bootstrap, topic, f"java-{topic}", [b"j0", b"j1"], commit=True)
    assert committed_values(broker, topic, 1) == [b"j0", b"j1"]


def committed_offset(broker: BrokerProcess, group: str, topic: str) -> int:
    """The group's committed offset; read_uncommitted, so librdkafka's OffsetFetch does not
    ask for stable offsets (KIP-447) and is answered while a transaction holds one."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        (position,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return position.offset
    finally:
        consumer.close()


def test_consumed_offsets_move_only_when_the_output_transaction_commits(
    broker: BrokerProcess,
) -> None:
    source, sink = new_topic(broker, partitions=1), new_topic(broker, partitions=1)
    feeder = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        feeder.produce(source, f"in-{i}".encode(), partition=0)
    assert feeder.flush(30) == 0
    group = f"copier-{source}"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(source, 0, OFFSET_BEGINNING)])
    producer = transactional_producer(broker, f"copier-{source}")
    try:
        for commit in (True, False):
            producer.begin_transaction()
            copied = 0
            deadline = time.monotonic() + READ_S
            while copied < 10 and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=10 - copied, timeout=0.2):
                    if message.error() is None:
                        producer.produce(sink, message.value(), partition=0)
                        copied += 1
            assert copied == 10
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            # Sent with the transaction, not committed yet.
            assert committed_offset(broker, group, source) == (-1001 if commit else 10)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            assert committed_offset(broker, group, source) == 10
    finally:
        consumer.close()
    assert committed_values(broker, sink, 1) == [f"in-{i}".encode() for i in range(10)]


def test_a_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=1)
    zombie = transactional_producer(broker, f"fenced-{topic}")
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = transactional_producer(broker, f"fenced-{topic}")
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)
    assert committed_values(broker, topic, 1) == [b"successor"]


def test_a_transaction_past_its_timeout_is_aborted_by_the_broker(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=1)
    silent = transactional_producer(broker, f"silent-{topic}", **{"transaction.timeout.ms": 1000})
    silent.begin_transaction()
    silent.produce(topic, b"never", partition=0)
    assert silent.flush(30) == 0
    # No commit: the broker aborts it; the last stable offset then passes its records.
    assert committed_values(broker, topic, 1) == []
    with pytest.raises(KafkaException):
        silent.commit_transaction(10)


def init_producer_id(port: int, transactional_id: str) -> tuple[int, int]:
    answer = kafka_api.call_broker(
        port,
        InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000),
        3,
    )
    assert answer.error_code == 0, answer
    return answer.producer_id, answer.producer_epoch


def wait_for_transaction_coordinator(broker: BrokerProcess, transactional_id: str) -> None:
    """librdkafka's init_transactions finds the coordinator (creating its topic) first."""
    transactional_producer(broker, transactional_id)


def test_end_txn_for_an_unknown_id_and_add_partitions_for_an_unknown_topic(
    broker: BrokerProcess,
) -> None:
    wait_for_transaction_coordinator(broker, "warm-up")
    ended = kafka_api.call_broker(
        broker.port,
        EndTxnRequest(
            transactional_id=f"never-{uuid.uuid4().hex}",
            producer_id=12345,
            producer_epoch=0,
            committed=True,
        ),
        3,
    )
    assert ended.error_code == INVALID_PRODUCER_ID_MAPPING
    transactional_id = f"unknown-topic-{uuid.uuid4().hex[:6]}"
    producer_id, epoch = init_producer_id(broker.port, transactional_id)
    added = kafka_api.call_broker(
        broker.port,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name="no-such-topic", partitions=[0]
                )
            ],
        ),
        3,
    )
    (topic,) = added.results_by_topic_v3_and_below
    assert [p.partition_error_code for p in topic.results_by_partition] == [
        UNKNOWN_TOPIC_OR_PARTITION
    ]


def transactional_batch(producer_id: int, epoch: int, value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=now_ms(), key=None, value=value, headers=[])
    return bytes(builder.build())


def test_a_transactional_produce_without_add_partitions_is_refused(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=1)
    transactional_id = f"stray-{topic}"
    wait_for_transaction_coordinator(broker, transactional_id)
    producer_id, epoch = init_producer_id(broker.port, transactional_id)
    request = kafka_api.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            kafka_api.ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    kafka_api.ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=0, records=transactional_batch(producer_id, epoch, b"stray")
                    )
                ],
            )
        ],
    )
    answer = kafka_api.call_broker(broker.port, request, 9)
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code == INVALID_TXN_STATE
    # Nothing was written: the log is empty and no transaction holds the partition back.
    assert committed_values(broker, topic, 1) == []
