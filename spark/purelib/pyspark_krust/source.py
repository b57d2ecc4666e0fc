"""The `krust` data source: Spark's Kafka connector's options and schema over the native
client."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .batch_reader import KrustBatchReader
from .errors import explained
from .options import INCLUDE_HEADERS, KrustOptionError
from .schema import source_schema
from .stream_reader import KrustStreamReader
from .writer import KrustBatchWriter, KrustStreamWriter


class KrustDataSource(DataSource):
    """`spark.read`/`readStream.format("krust")` and `df.write`/`writeStream.format("krust")`."""

    @classmethod
    def name(cls) -> str:
        return "krust"

    @explained
    def schema(self) -> StructType:
        raw = self.options.get(INCLUDE_HEADERS, "false").strip().lower()
        if raw not in ("true", "false"):
            raise KrustOptionError(f"option {INCLUDE_HEADERS} must be true or false, not {raw!r}")
        return source_schema(raw == "true")

    @explained
    def reader(self, schema: StructType) -> DataSourceReader:
        return KrustBatchReader(self.options)

    @explained
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KrustStreamReader(self.options)

    @explained
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise KrustOptionError("Kafka topics are append-only: use mode('append')")
        return KrustBatchWriter(self.options, schema)

    @explained
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Complete mode asks to overwrite: like Spark's Kafka sink, each trigger appends the
        # whole result table to the topic, the newest record per key being the current one.
        return KrustStreamWriter(self.options, schema)
