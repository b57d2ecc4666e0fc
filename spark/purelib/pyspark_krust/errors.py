"""The data source's own errors reach the user with their cause on the first line.

Spark shows a Python worker's failure as `[PYTHON_DATA_SOURCE_ERROR] Failed to ...: ` followed by
what the worker wrote, by default the whole traceback, so the cause came last. The worker asks
one environment variable, SPARK_HIDE_TRACEBACK (Spark's
`spark.sql.execution.pyspark.udf.hideTraceback.enabled`), when it formats the exception, and
exits after a failure (pyspark's worker and planner `main`s call `sys.exit(-1)`), so setting it
as one of our errors leaves changes that one message and nothing else: `KrustOptionError: unknown
option ...` right after Spark's prefix. Errors the source does not expect (bugs) keep their
traceback.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from krust._core import KafkaClientError, KafkaConfigError

from .options import KrustOptionError

P = ParamSpec("P")
T = TypeVar("T")

# Errors whose message names the cause (an option, a broker, a partition): their traceback is
# the data source's internals, of no use to the user.
EXPLAINED = (KrustOptionError, KafkaClientError, KafkaConfigError)


def _hide_traceback() -> None:
    os.environ["SPARK_HIDE_TRACEBACK"] = "1"


def explained(function: Callable[P, T]) -> Callable[P, T]:
    """`function`'s explained errors are shown by their message alone."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return function(*args, **kwargs)
        except EXPLAINED:
            _hide_traceback()
            raise

    return wrapper


def explained_rows(rows: Iterator[T]) -> Iterator[T]:
    """The same for the errors raised while `rows` are read (a task's `read`)."""
    try:
        yield from rows
    except EXPLAINED:
        _hide_traceback()
        raise
