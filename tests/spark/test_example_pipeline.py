"""examples/spark_windowed_counts.py, the streaming pipeline a user runs against krust-broker,
counts every key's records per window and writes the counts to its output topic."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from integration.broker_process import BrokerProcess
from pyspark.sql import SparkSession

from .conftest import REPO

QUERY_TIMEOUT_S = 120


def load_example() -> ModuleType:
    path = REPO / "examples" / "spark_windowed_counts.py"
    spec = importlib.util.spec_from_file_location("spark_windowed_counts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pipeline_counts_each_key_per_window(
    spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    example = load_example()
    bootstrap, source, sink = spark_broker.bootstrap, "example-clicks", "example-counts"
    example.write_demo_clicks(spark, bootstrap, source, count=12)

    query = example.start_pipeline(
        spark, bootstrap, source, sink, str(tmp_path / "checkpoint"), once=True
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the pipeline did not finish"
    assert query.exception() is None

    rows = (
        spark.read.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", sink)
        .load()
        .orderBy("offset")
        .collect()
    )
    # Complete mode: the last count written for a key and window is its total.
    latest: dict[tuple[str, str], int] = {}
    for row in rows:
        count = json.loads(bytes(row.value))
        assert bytes(row.key).decode() == count["key"]
        latest[(count["key"], count["window_start"])] = count["count"]
    per_key: dict[str, int] = {}
    for (key, _window), count in latest.items():
        per_key[key] = per_key.get(key, 0) + count
    assert per_key == {"user-0": 4, "user-1": 4, "user-2": 4}
