"""One local[2] SparkSession for every Spark test, which finds the `krust` data source by itself,
and one krust broker for them (each test uses its own topics); reading a partition back whole."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.broker_process import BrokerProcess, shared_broker
from integration.clients.confluent import assigned_consumer, poll_records, watermarks
from integration.records import Consumed
from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
# The wheel installs spark/purelib/pyspark_krust; the tests run the source itself (an editable
# install holds a copy made at install time). Spark's Python workers inherit PYTHONPATH from the
# driver's environment, so the source goes there as well as onto this process's path.
SPARK_PACKAGE_ROOT = REPO / "spark" / "purelib"
sys.path.insert(0, str(SPARK_PACKAGE_ROOT))
# Spark's own Kafka connector, fetched by scripts/install-test-deps.sh
# (tests/java/spark-kafka/pom.xml), for the test that checks it works against krust.
SPARK_KAFKA_JARS = sorted((REPO / "tests" / "java" / "build" / "spark-kafka-libs").glob("*.jar"))
# The tests' jobs are small and the JVM short-lived: C2's compiles and parallel GC threads cost
# more CPU than they win back, on a machine of two cores shared with the rest of the suite.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
CONSUME_TIMEOUT_S = 30.0


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(SPARK_PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("krust-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", ",".join(str(jar) for jar in SPARK_KAFKA_JARS))
        .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
        .getOrCreate()
    )
    # No register() call: Spark's own lookup finds pyspark_krust.DefaultSource on PYTHONPATH.
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from shared_broker(tmp_path_factory.mktemp("spark-broker"))


def consume_partition(bootstrap: str, topic: str, partition: int) -> list[Consumed]:
    """Every record of a partition, from offset 0 up to its high watermark. The watermark counts
    the records the log holds, so a row written twice shows as one more record without waiting
    a while for a record that may never come (a write returns once every record is acked)."""
    earliest, latest = watermarks(bootstrap, topic, partition)
    assert earliest == 0, f"{topic}-{partition} starts at {earliest}"
    consumer = assigned_consumer(bootstrap, topic, partition)
    try:
        consumed = poll_records(consumer, latest, timeout_s=CONSUME_TIMEOUT_S)
    finally:
        consumer.close()
    assert [c.offset for c in consumed] == list(range(latest)), f"{topic}-{partition} read whole"
    return consumed
