"""`[DATA_SOURCE_NOT_FOUND]` when Spark's Python workers run an interpreter without
pyspark_krust: check_workers says which interpreter and what to set."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark_krust import check_workers

from .conftest import DRIVER_JAVA_OPTIONS, SPARK_PACKAGE_ROOT

SESSION_TIMEOUT_S = 180

# A session whose workers cannot import pyspark_krust: their interpreter finds a
# pyspark_krust that fails to import first on its path, as an interpreter without it would.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    from pyspark_krust import WorkerPythonError, check_workers

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", sys.argv[1])
        .getOrCreate()
    )
    try:
        spark.read.format("krust").load()
    except Exception as e:
        print("READ:", " ".join(str(e).split()))
    try:
        check_workers(spark)
    except WorkerPythonError as e:
        print("CHECK:", e)
    spark.stop()
    """
)


def test_the_test_sessions_workers_load_the_source(spark: SparkSession) -> None:
    check_workers(spark)


def test_workers_without_the_source_are_named_with_what_to_set(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "pyspark_krust"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed here')\n")
    worker = tmp_path / "worker-python"
    worker.write_text(
        f'#!/bin/sh\nPYTHONPATH={shadow.parent}:"$PYTHONPATH" exec {sys.executable} "$@"\n'
    )
    worker.chmod(0o755)
    env = {
        **os.environ,
        "PYTHONPATH": str(SPARK_PACKAGE_ROOT) + ":" + ":".join(p for p in sys.path if p),
        "PYSPARK_PYTHON": str(worker),
    }
    # Unset, as when a script is run with `python script.py`: Spark then looks data sources up
    # with PYSPARK_PYTHON's interpreter too.
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, DRIVER_JAVA_OPTIONS],
        env=env,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT_S,
        check=False,
    )
    read = next(line for line in done.stdout.splitlines() if line.startswith("READ:"))
    assert "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: krust" in read, read
    check = next(line for line in done.stdout.splitlines() if line.startswith("CHECK:"))
    assert f"Spark looks Python data sources up with {worker} " in check
    assert "which cannot import pyspark_krust (ImportError: not installed here)" in check
    assert f"set PYSPARK_PYTHON={sys.executable}" in check
