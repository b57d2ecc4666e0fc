"""`df.write.format("krust")`: each task hands its Arrow batches to the native producer."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from krust._core import KafkaClient, KafkaClientError
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from .errors import explained
from .options import EXACTLY_ONCE, TOPIC, KrustOptionError, WriteOptions, write_options
from .schema import HEADERS


def nullable(data_type: DataType) -> DataType:
    """`data_type` with every field, element and map value nullable: two types are the same
    column type, for the sink, when their nullable forms are equal (Spark's Kafka connector
    compares with `DataType.equalsIgnoreNullability`), e.g. `F.array(F.struct(F.lit(...)))`
    gives non-nullable fields that are still valid headers."""
    if isinstance(data_type, ArrayType):
        return ArrayType(nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(nullable(data_type.keyType), nullable(data_type.valueType), True)
    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True) for f in data_type])
    return data_type


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink columns: value required; key, topic, partition, headers optional."""
    types = {field.name: field.dataType for field in schema.fields}
    bytes_like = (BinaryType(), StringType())
    if "value" not in types:
        raise KrustOptionError("the data written needs a value column (binary or string)")
    for name in ("value", "key"):
        if name in types and types[name] not in bytes_like:
            raise KrustOptionError(
                f"column {name} must be binary or string, not {types[name].simpleString()}"
            )
    if "topic" in types and types["topic"] != StringType():
        raise KrustOptionError(f"column topic must be string, not {types['topic'].simpleString()}")
    if "topic" not in types and topic_option is None:
        raise KrustOptionError(f"give a topic column or the option {TOPIC}")
    if "partition" in types and types["partition"] != IntegerType():
        raise KrustOptionError(
            f"column partition must be int, not {types['partition'].simpleString()}"
        )
    if "headers" in types and nullable(types["headers"]) != nullable(HEADERS.dataType):
        raise KrustOptionError(
            f"column headers must be {HEADERS.dataType.simpleString()}, "
            f"not {types['headers'].simpleString()}"
        )


class KrustCommitMessage(WriterCommitMessage):
    def __init__(self, records: int, replayed: bool = False) -> None:
        self.records = records
        # exactlyOnce: the task's rows of this batch were already committed, none were written.
        self.replayed = replayed


# Arrow batches produced while the task reads the next ones from Spark. `produce` releases the
# GIL for its encoding and its round trips, so waiting for the broker's acks overlaps Spark's
# JVM converting, and this worker reading, the next batch, instead of stalling both. One thread
# keeps the batches in order (the idempotent producer's sequences); the window bounds memory.
PRODUCE_WINDOW = 2


def produce_batches(
    client: KafkaClient, options: WriteOptions, iterator: Iterator[pa.RecordBatch]
) -> int:
    """Produces every batch of `iterator` in order; returns the number of records."""
    records = 0
    pending: deque[Future[int]] = deque()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="krust-produce") as pool:
        try:
            for batch in iterator:
                pending.append(
                    pool.submit(
                        client.produce, batch, options.topic, options.acks, options.compression
                    )
                )
                while len(pending) >= PRODUCE_WINDOW:
                    records += pending.popleft().result()
            while pending:
                records += pending.popleft().result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return records


def produce_all(options: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> KrustCommitMessage:
    """One task's rows, produced batch by batch by one idempotent producer."""
    return KrustCommitMessage(produce_batches(options.cluster.client(), options, iterator))


# Local properties Spark's micro-batch execution sets on every task of a batch
# (MicroBatchExecution.BATCH_ID_KEY, StreamExecution.QUERY_ID_KEY). The query id is the one in
# the checkpoint's metadata: the same after a restart.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class StreamTask:
    """Which micro-batch, and which of its tasks, a write is."""

    query_id: str
    batch_id: int
    partition: int

    @classmethod
    def current(cls) -> StreamTask:
        context = TaskContext.get()
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        if context is None or batch_id is None or query_id is None:
            raise KrustOptionError(
                f"option {EXACTLY_ONCE}: this task is not part of a streaming micro-batch"
            )
        return cls(query_id, int(batch_id), context.partitionId())

    def transactional_id(self, prefix: str) -> str:
        """One per query and Spark partition: a retried or replayed task fences the attempt
        before it and aborts what that attempt left open."""
        return f"{prefix}{self.query_id}-{self.partition}"


def produce_exactly_once(
    options: WriteOptions, iterator: Iterator[pa.RecordBatch]
) -> KrustCommitMessage:
    """One task's rows in one Kafka transaction, which also commits the batch id as the offset
    of a consumer group named after the transactional id (TxnOffsetCommit): the rows and the
    batch id become visible together or not at all. A task whose batch id is already
    committed is a replay (the driver died between the tasks' commits and Spark's commit log):
    it writes nothing."""
    assert options.topic is not None, "write_options requires the topic option"
    task = StreamTask.current()
    transactional_id = task.transactional_id(options.transactional_id_prefix)
    client = options.cluster.client()
    client.init_transactions(transactional_id)
    committed = client.committed_offset(transactional_id, options.topic, 0)
    if committed is not None and committed[0] >= task.batch_id:
        return KrustCommitMessage(0, replayed=True)
    try:
        records = produce_batches(client, options, iterator)
        client.send_offsets_to_transaction(
            transactional_id,
            options.topic,
            0,
            task.batch_id,
            f"spark query {task.query_id} batch {task.batch_id}",
        )
        client.commit_transaction()
    except BaseException:
        # Best effort: the next producer of this transactional id aborts it anyway.
        with contextlib.suppress(KafkaClientError):
            client.abort_transaction()
        raise
    return KrustCommitMessage(records)


class KrustBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = write_options(options, streaming=False)
        check_sink_schema(schema, self.options.topic)

    @explained
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_all(self.options, iterator)


class KrustStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("krust")`: at least once by default, like Spark's Kafka sink: a
    micro-batch retried after a failure may write some of its rows again. With exactlyOnce,
    each task writes in a transaction that records its batch id, and a replayed batch's tasks
    that already committed write nothing (read it read_committed)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = write_options(options, streaming=True)
        check_sink_schema(schema, self.options.topic)

    @explained
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.exactly_once:
            return produce_exactly_once(self.options, iterator)
        return produce_all(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The records are in Kafka once every task's write returned."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Kafka cannot take back records written: they stay (at-least-once); with
        exactlyOnce each failed task aborted its own transaction."""
