"""kcat (Debian's, librdkafka 2.0.2): line-oriented produce with -K/-H/-Z, JSON consume with -J.

kcat cannot set a record's timestamp and -H gives every record the same headers, so records
produced here carry one header set and the producer's clock as CreateTime.
"""

from __future__ import annotations

import json
import subprocess

from ..records import Consumed, Record

KEY_DELIMITER = "\t"
COMMAND_TIMEOUT_S = 60


def _line_field(data: bytes | None) -> str:
    """A key or value as one field of kcat's input line; -Z turns an empty field into NULL."""
    if data is None:
        return ""
    text = data.decode()
    assert text and "\t" not in text and "\n" not in text, f"kcat cannot send {data!r}"
    return text


class KcatClient:
    name = "kcat"
    per_record_headers = False
    sets_timestamps = False

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        headers = records[0].headers
        assert all(record.headers == headers for record in records), "kcat: one header set"
        lines = "".join(
            f"{_line_field(record.key)}{KEY_DELIMITER}{_line_field(record.value)}\n"
            for record in records
        )
        command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition)]
        command += ["-K", KEY_DELIMITER, "-Z", "-X", f"compression.codec={codec}"]
        command += ["-X", "enable.idempotence=true", "-X", "acks=all"]
        for name, value in headers:
            command += ["-H", f"{name}={value.decode()}"]
        result = subprocess.run(
            command, input=lines.encode(), capture_output=True, timeout=COMMAND_TIMEOUT_S
        )
        assert result.returncode == 0, f"kcat -P failed: {result.stderr.decode()}"
        assert b"failed" not in result.stderr.lower(), result.stderr.decode()

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        command = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition)]
        command += ["-o", "beginning", "-c", str(count), "-e", "-J", "-q"]
        result = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s
        )
        assert result.returncode == 0, f"kcat -C failed: {result.stderr.decode()}"
        return [_consumed(json.loads(line)) for line in result.stdout.splitlines()]


def _encoded(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _consumed(message: dict) -> Consumed:
    flat = message.get("headers") or []
    headers = tuple((flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2))
    record = Record(_encoded(message["key"]), _encoded(message["payload"]), headers, message["ts"])
    return Consumed(message["offset"], record)
