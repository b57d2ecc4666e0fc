"""The coordinator runtime: an internal topic's writer, its loader and partition ownership."""

from __future__ import annotations

import asyncio
import logging

import pytest
from krust.coordinator.loader import replay
from krust.coordinator.log import CoordinatorLog
from krust.coordinator.partitions import CoordinatorPartitions, Install, PartitionState

from .doubles.group import FakeCore, async_test

TOPIC = "__test_state"


class TextCodec:
    """Records are (key, value) strings; a key starting with "other:" is another coordinator's."""

    def encode(self, record: tuple[str, str]) -> tuple[bytes, bytes | None]:
        return record[0].encode(), record[1].encode()

    def decode(self, key: bytes | None, value: bytes | None) -> tuple[str, str] | None:
        if key is None or value is None:
            raise ValueError("key and value are required")
        text = key.decode()  # UnicodeDecodeError is a ValueError
        return None if text.startswith("other:") else (text, value.decode())


@async_test
async def test_records_are_written_to_the_coordinators_own_topic_and_read_back() -> None:
    core = FakeCore()
    log = CoordinatorLog(core, asyncio.get_running_loop(), TOPIC, TextCodec())
    await log.append(3, [("a", "1"), ("b", "2")])
    assert [(r["key"], r["value"]) for r in core.logs[(TOPIC, 3)]] == [(b"a", b"1"), (b"b", b"2")]
    applied: list[tuple[str, str]] = []
    stats = await replay(log, 3, 1024, applied.append)
    assert applied == [("a", "1"), ("b", "2")]
    assert (stats.records, stats.skipped) == (2, 0)


@async_test
async def test_replay_skips_what_does_not_parse_or_is_refused_and_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = FakeCore()
    core.internal_append(
        TOPIC,
        0,
        [
            (b"a", b"1"),
            (b"\xff\xfe", b"x"),  # does not parse
            (b"other:txn", b"y"),  # another coordinator's record type
            (b"forged", b"z"),  # parses, but the coordinator refuses it
            (None, b"no key"),
            (b"a", b"2"),
        ],
    )
    log = CoordinatorLog(core, asyncio.get_running_loop(), TOPIC, TextCodec())
    state: dict[str, str] = {}

    def apply(record: tuple[str, str]) -> None:
        key, value = record
        if key == "forged":
            raise ValueError("not a record this coordinator writes")
        state[key] = value

    with caplog.at_level(logging.WARNING):
        stats = await replay(log, 0, 1024, apply)
    assert state == {"a": "2"}
    assert (stats.records, stats.skipped) == (6, 3)
    warnings = [r.getMessage() for r in caplog.records]
    assert any(f"{TOPIC}-0 offset 1" in line for line in warnings)
    assert any(f"{TOPIC}-0 offset 3" in line for line in warnings)
    assert len(core.logs[(TOPIC, 0)]) == 6  # nothing is rewritten or removed


@async_test
async def test_a_partition_is_active_only_once_its_load_is_installed() -> None:
    gate = asyncio.Event()
    installed: list[int] = []
    unloaded: list[int] = []

    async def load(partition: int) -> Install:
        await gate.wait()
        if partition == 2:
            raise OSError("injected read failure")
        return lambda: installed.append(partition)

    partitions = CoordinatorPartitions(asyncio.get_running_loop(), TOPIC, load, unloaded.append)
    partitions.sync({0: 1, 1: 1, 2: 1, 3: 9}, node_id=1)
    assert partitions.state(0) is PartitionState.LOADING and partitions.any_loading()
    assert partitions.state(3) is None
    # Another broker takes partition 1 while it loads: its state is never installed.
    partitions.sync({1: 9}, node_id=1)
    gate.set()
    await partitions.wait_loaded()
    assert installed == [0]
    assert unloaded == [1]
    assert partitions.is_active(0)
    # A failed load leaves the partition unknown, so the next request starts it again.
    assert not partitions.is_known(2) and not partitions.any_loading()
