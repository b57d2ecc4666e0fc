"""Whether Spark's Python workers can load this data source, and what to set when they cannot.

Spark runs Python data sources in Python workers, not in the driver's interpreter. It looks them
up, and plans their reads and writes, on the driver's machine with the interpreter named by
`spark.sql.execution.pyspark.python`, else PYSPARK_DRIVER_PYTHON, else PYSPARK_PYTHON, else
`python3` on the PATH (Spark's PythonUtils.defaultPythonExec); tasks run on executors with
`spark.pyspark.python`, else PYSPARK_PYTHON, else `python3`. An interpreter without
`pyspark_krust` makes `format("krust")` fail with `[DATA_SOURCE_NOT_FOUND]`, which does not say
why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

# Run in a worker. Compiled here rather than defined as a function of this module: Spark
# pickles a module's functions by reference, and a worker without pyspark_krust could not
# unpickle it; a function of no importable module is pickled by value.
_PROBE_SOURCE = """
def probe(_):
    import sys
    try:
        import pyspark_krust  # noqa: F401
        error = None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    return sys.executable, error
"""


class WorkerPythonError(RuntimeError):
    """Spark's Python workers cannot load the `krust` data source."""


def _probe() -> Callable[[Any], tuple[str, str | None]]:
    namespace: dict[str, Any] = {"__name__": "pyspark_krust_worker_probe"}
    exec(compile(_PROBE_SOURCE, "<pyspark_krust worker probe>", "exec"), namespace)
    probe: Callable[[Any], tuple[str, str | None]] = namespace["probe"]
    return probe


def planner_python(spark: SparkSession) -> str:
    """The interpreter Spark looks data sources up with, on the driver's machine."""
    configured = spark.conf.get("spark.sql.execution.pyspark.python", None)
    return (
        configured
        or os.environ.get("PYSPARK_DRIVER_PYTHON")
        or os.environ.get("PYSPARK_PYTHON")
        or "python3"
    )


def worker_python(spark: SparkSession) -> str:
    """The interpreter Spark starts its executors' Python workers with."""
    configured = spark.sparkContext.getConf().get("spark.pyspark.python")
    return configured or os.environ.get("PYSPARK_PYTHON") or "python3"


def _import_error(python: str) -> str | None:
    """Why `python` cannot import pyspark_krust, None if it can."""
    try:
        done = subprocess.run(
            [python, "-c", "import pyspark_krust"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run it: {e}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def fix(worker: str) -> str:
    return (
        f"install krust-broker[spark] into the workers' interpreter ({worker}), or run the workers "
        f"with this driver's: set PYSPARK_PYTHON={sys.executable} (or the Spark config "
        "spark.pyspark.python) before the SparkSession starts"
    )


def check_workers(spark: SparkSession) -> None:
    """Raises WorkerPythonError, naming the interpreter and what to set, if the interpreter
    Spark looks data sources up with, or its executors' (asked with one small task), cannot
    import pyspark_krust."""
    planner = planner_python(spark)
    error = _import_error(planner)
    if error is not None:
        raise WorkerPythonError(
            f"Spark looks Python data sources up with {planner} (PYSPARK_DRIVER_PYTHON, else "
            f"PYSPARK_PYTHON, else python3), which cannot import pyspark_krust ({error}); this "
            f"driver runs {sys.executable}: {fix(planner)}"
        )
    worker = worker_python(spark)
    try:
        [(executable, error)] = spark.sparkContext.parallelize([0], 1).map(_probe()).collect()
    except Exception as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WorkerPythonError(
            f"Spark's Python workers ({worker}) failed to run a Python task: {fix(worker)}. "
            f"Spark said: {first_line}"
        ) from e
    if error is not None:
        raise WorkerPythonError(
            f"Spark's Python workers run {executable}, which cannot import pyspark_krust "
            f"({error}); this driver runs {sys.executable}: {fix(executable)}"
        )
