"""`df.write.format("krust")`: each task hands its Arrow batches to the native producer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa
from krust._core import KafkaClient
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from .options import TOPIC, KrustOptionError, write_options
from .schema import HEADERS


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
    if "headers" in types and types["headers"] != HEADERS.dataType:
        raise KrustOptionError(
            f"column headers must be {HEADERS.dataType.simpleString()}, "
            f"not {types['headers'].simpleString()}"
        )


class KrustCommitMessage(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


class KrustBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = write_options(options)
        check_sink_schema(schema, self.options.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        options = self.options
        client = KafkaClient(options.bootstrap_servers)
        records = 0
        for batch in iterator:
            records += client.produce(batch, options.topic, options.acks, options.compression)
        return KrustCommitMessage(records)
