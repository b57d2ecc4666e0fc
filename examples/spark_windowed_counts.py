"""A streaming pipeline on krust: count each key's records per one-minute event-time window, read
from one topic and written as JSON to another, with Spark and the `krust` data source.

One command against a local broker (`krust-broker` listens on localhost:9092 by default), after
`pip install 'krust-broker[spark]'`, which installs the data source where Spark finds it by itself:

    python examples/spark_windowed_counts.py --demo

`--demo` first writes a few sample clicks to the input topic; without it the pipeline runs on
whatever is there. `--once` reads what is available and stops (Trigger.AvailableNow); otherwise
the query runs until Ctrl-C. Every trigger writes the whole count table (complete mode: Python
streaming sinks take append or complete), with the key as the record key, so a compacted output
topic keeps the latest count of every key and window.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import window
from pyspark.sql.streaming import StreamingQuery

WINDOW = "1 minute"
# How late a record may arrive and still count in its window; older windows leave the table.
WATERMARK = "10 minutes"


def windowed_counts(records: DataFrame) -> DataFrame:
    """Per key and window: the record count, as (key, value=JSON) rows for the Kafka sink."""
    return (
        records.withWatermark("timestamp", WATERMARK)
        .groupBy("key", window("timestamp", WINDOW))
        .count()
        .selectExpr(
            "key",
            "to_json(named_struct('key', CAST(key AS STRING), 'window_start', window.start, "
            "'count', count)) AS value",
        )
    )


def start_pipeline(
    spark: SparkSession,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    checkpoint: str,
    *,
    once: bool,
) -> StreamingQuery:
    records = (
        spark.readStream.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    writer = (
        windowed_counts(records)
        .writeStream.format("krust")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
    )
    return (writer.trigger(availableNow=True) if once else writer).start()


def write_demo_clicks(spark: SparkSession, bootstrap: str, topic: str, count: int = 9) -> None:
    """`count` clicks by three users (their event time is when they are written)."""
    clicks = [(f"user-{i % 3}", f"click {i}") for i in range(count)]
    (
        spark.createDataFrame(clicks, "key string, value string")
        .write.format("krust")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--input", default="clicks")
    parser.add_argument("--output", default="clicks-per-minute")
    parser.add_argument("--checkpoint", default=None, help="default: a new temporary directory")
    parser.add_argument("--demo", action="store_true", help="write sample clicks first")
    parser.add_argument("--once", action="store_true", help="read what is there, then stop")
    args = parser.parse_args(argv)

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("krust windowed counts")
        # A few keys on one machine: Spark's default of 200 shuffle partitions is mostly idle.
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    if args.demo:
        write_demo_clicks(spark, args.bootstrap, args.input)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="krust-windowed-counts-")
    query = start_pipeline(
        spark, args.bootstrap, args.input, args.output, checkpoint, once=args.once or args.demo
    )
    query.awaitTermination()
    print(f"counts per {WINDOW} written to {args.output}; checkpoint in {checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
