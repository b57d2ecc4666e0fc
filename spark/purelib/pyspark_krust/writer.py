"""`df.write.format("krust")`: each task hands its Arrow batches to the native producer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa
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
from .options import TOPIC, KrustOptionError, WriteOptions, write_options
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
    def __init__(self, records: int) -> None:
        self.records = records


def produce_all(options: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> KrustCommitMessage:
    """One task's rows, produced batch by batch by one idempotent producer."""
    client = options.cluster.client()
    records = 0
    for batch in iterator:
        records += client.produce(batch, options.topic, options.acks, options.compression)
    return KrustCommitMessage(records)


class KrustBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = write_options(options)
        check_sink_schema(schema, self.options.topic)

    @explained
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_all(self.options, iterator)


class KrustStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("krust")`: at least once, like Spark's Kafka sink: a micro-batch
    retried after a failure may write some of its rows again."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = write_options(options)
        check_sink_schema(schema, self.options.topic)

    @explained
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_all(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The records are in Kafka once every task's write returned."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Kafka cannot take back records written: they stay (at-least-once)."""
