"""A PySpark data source named `krust` for Kafka-protocol brokers (krust, Apache Kafka).

Spark finds it by itself: when a session first needs a Python data source, it imports every
top-level module named `pyspark_*` on the Python path and registers its `DefaultSource`. So with
this package importable, and no other step::

    df = (spark.read.format("krust")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

`register(spark)` does the same explicitly, for a session whose lookup ran before the package was
importable, and checks that Spark's Python workers can load it: `[DATA_SOURCE_NOT_FOUND]` means
they run an interpreter without it, and `check_workers(spark)` says which and what to set.

Reads and writes go through the Rust client in `krust._core`: records are decoded into Arrow
batches in Rust and produced from Arrow batches in Rust, never one Python object per record.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from .options import KrustOptionError
from .source import KrustDataSource
from .workers import WorkerPythonError, check_workers

# The name Spark's data source lookup looks for (pyspark/sql/worker/lookup_data_sources.py).
DefaultSource = KrustDataSource

__all__ = [
    "DefaultSource",
    "KrustDataSource",
    "KrustOptionError",
    "WorkerPythonError",
    "check_workers",
    "register",
]


def register(spark: SparkSession) -> None:
    """Makes `format("krust")` available in `spark`, after checking that Spark's Python workers
    can load it (WorkerPythonError says what to set when they cannot)."""
    check_workers(spark)
    spark.dataSource.register(KrustDataSource)
