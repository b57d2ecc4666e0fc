"""A PySpark data source named `krust` for Kafka-protocol brokers (krust, Apache Kafka).

Register it once per session, then use it like Spark's Kafka connector::

    import krust_spark
    krust_spark.register(spark)
    df = (spark.read.format("krust")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Reads and writes go through the Rust client in `krust._core`: records are decoded into Arrow
batches in Rust and produced from Arrow batches in Rust, never one Python object per record.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from .options import KrustOptionError
from .source import KrustDataSource

__all__ = ["KrustDataSource", "KrustOptionError", "register"]


def register(spark: SparkSession) -> None:
    """Makes `format("krust")` available in `spark`."""
    spark.dataSource.register(KrustDataSource)
