"""The Apache Kafka Java client, through tests/java/src/KrustJavaClient.java run in a long-lived
JVM (../java_server.py).

scripts/install-test-deps.sh fetches the jars and compiles the program; records cross the process
boundary as tab-separated hex fields (see the Java program's doc comment).
"""

from __future__ import annotations

from pathlib import Path

from ..java_server import run_main
from ..records import Consumed, Headers, Record

JAVA_DIR = Path(__file__).resolve().parents[2] / "java"
CLASSPATH = f"{JAVA_DIR / 'build' / 'classes'}:{JAVA_DIR / 'build' / 'libs' / '*'}"
MAIN_CLASS = "KrustJavaClient"
NULL = "-"
COMMAND_TIMEOUT_S = 90


class JavaCommandError(AssertionError):
    """The Java program exited non-zero; `message` is its "error: Exception: ..." line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def run_java(*args: str, stdin: str = "", timeout_s: float = COMMAND_TIMEOUT_S) -> str:
    result = run_main(CLASSPATH, MAIN_CLASS, *args, stdin=stdin, timeout_s=timeout_s)
    if result.returncode != 0:
        raise JavaCommandError(result.stderr.strip())
    return result.stdout


def _hex(data: bytes | None) -> str:
    return NULL if data is None else data.hex()


def _bytes(field: str) -> bytes | None:
    return None if field == NULL else bytes.fromhex(field)


def _hex_headers(headers: Headers) -> str:
    if not headers:
        return NULL
    return ",".join(f"{name.encode().hex()}:{_hex(value)}" for name, value in headers)


def _parse_headers(field: str) -> Headers:
    if field == NULL:
        return ()
    pairs = (pair.split(":", 1) for pair in field.split(","))
    return tuple((bytes.fromhex(name).decode(), _bytes(value)) for name, value in pairs)


class JavaClient:
    name = "java"
    per_record_headers = True
    sets_timestamps = True

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        lines = "".join(
            "\t".join(
                (
                    str(partition),
                    NULL if record.timestamp is None else str(record.timestamp),
                    _hex(record.key),
                    _hex(record.value),
                    _hex_headers(record.headers),
                )
            )
            + "\n"
            for record in records
        )
        acknowledged = run_java("produce", bootstrap, topic, codec, stdin=lines).splitlines()
        assert len(acknowledged) == len(records), f"acknowledged {len(acknowledged)} records"

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        timeout_ms = str(int(timeout_s * 1000))
        output = run_java(
            "consume",
            bootstrap,
            topic,
            str(partition),
            str(count),
            timeout_ms,
            timeout_s=timeout_s + COMMAND_TIMEOUT_S,
        )
        consumed = []
        for line in output.splitlines():
            offset, _partition, timestamp, key, value, headers = line.split("\t")
            record = Record(_bytes(key), _bytes(value), _parse_headers(headers), int(timestamp))
            consumed.append(Consumed(int(offset), record))
        return consumed


def transact(
    bootstrap: str, topic: str, transactional_id: str, values: list[bytes], commit: bool
) -> None:
    """One transaction of the Java client's transactional producer, to partition 0."""
    run_java(
        "transact",
        bootstrap,
        topic,
        transactional_id,
        "commit" if commit else "abort",
        stdin="".join(f"{value.hex()}\n" for value in values),
    )
