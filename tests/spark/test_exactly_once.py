"""`writeStream.format("krust")` with exactlyOnce: after kill -9 of the Spark driver mid-stream
and a restart from the checkpoint, the topic, read read_committed, holds every input row once.

A slow test (two Spark drivers of their own, about a minute): a hard kill needs a driver in
another process than the test's shared SparkSession, and nothing cheaper shows a replayed
micro-batch against real Kafka transactions. It is kept small: 8 files of 250 rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from integration.broker_process import BrokerProcess
from integration.clients.confluent import create_topic, poll_records

from .conftest import DRIVER_JAVA_OPTIONS, SPARK_PACKAGE_ROOT

FILES, ROWS_PER_FILE = 8, 250
DRIVER_TIMEOUT_S = 240
READ_TIMEOUT_S = 5.0

DRIVER = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    bootstrap, topic, source, checkpoint, trigger, java_options = sys.argv[1:]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", java_options)
        .getOrCreate()
    )
    writer = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", "1")
        .json(source)
        .selectExpr("CAST(id AS STRING) AS value")
        .repartition(2)
        .writeStream.format("krust")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
    )
    if trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    writer.start().awaitTermination()
    """
)


def start_driver(args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SPARK_PACKAGE_ROOT), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, *args, DRIVER_JAVA_OPTIONS],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # Its own process group: kill -9 reaches the driver's JVM and Python workers too.
        start_new_session=True,
    )


def committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return []
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def read_committed(bootstrap: str, topic: str, partitions: int, at_most: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-exactly-once",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        # One more than expected: a row written twice shows up instead of being cut off.
        return [c.record.value or b"" for c in poll_records(consumer, at_most + 1, READ_TIMEOUT_S)]
    finally:
        consumer.close()


def test_a_killed_driver_restarted_from_its_checkpoint_writes_each_row_once(
    spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap, topic = spark_broker.bootstrap, "spark-exactly-once"
    create_topic(bootstrap, topic, partitions=2)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    for n in range(FILES):
        ids = range(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE)
        (source / f"{n:02}.json").write_text("".join(f'{{"id": {i}}}\n' for i in ids))
    args = [bootstrap, topic, str(source), str(checkpoint)]

    driver = start_driver([*args, "continuous"])
    deadline = time.monotonic() + DRIVER_TIMEOUT_S
    while len(committed_batches(checkpoint)) < 3:
        assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
        assert time.monotonic() < deadline, "the stream did not commit three batches"
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    assert len(committed_batches(checkpoint)) < FILES, "killed mid-stream, not after the end"

    # The kill may or may not land between a batch's transactions and Spark's commit log; make
    # sure a committed batch is replayed: its entry in the commit log goes, as if the driver had
    # died just before writing it. Spark then runs that batch again on restart.
    replayed = committed_batches(checkpoint)[-1]
    for name in (str(replayed), f".{replayed}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)

    driver = start_driver([*args, "availableNow"])
    try:
        _, stderr = driver.communicate(timeout=DRIVER_TIMEOUT_S)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 0, stderr.decode()[-3000:]
    assert replayed in committed_batches(checkpoint), "the batch was run again"
    assert len(committed_batches(checkpoint)) >= FILES

    values = read_committed(bootstrap, topic, 2, FILES * ROWS_PER_FILE)
    assert len(values) == FILES * ROWS_PER_FILE, "every row once, none twice"
    assert sorted(int(v) for v in values) == list(range(FILES * ROWS_PER_FILE))
