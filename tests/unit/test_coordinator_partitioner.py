"""A group's coordinator partition must match Kafka's, or clients and Kafka tools disagree."""

from __future__ import annotations

import pytest
from krust.coordinator.partitioner import java_string_hashcode, kafka_abs, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),
        # g=103 r=114 o=111 u=117 p=112, Horner's rule by hand: 103 -> 3307 -> 102628 -> 3181585
        ("group", 98629247),
        # The classic collision: 'A'*31 + 'a' == 'B'*31 + 'B'.
        ("Aa", 2112),
        ("BB", 2112),
        # Overflows int32 to exactly Integer.MIN_VALUE (a well-known Java curiosity).
        ("polygenelubricants", -(2**31)),
        # U+1F600 is two UTF-16 code units, 0xD83D and 0xDE00: 55357 * 31 + 56832.
        ("\U0001f600", 1772899),
        # 'é' is one code unit (233), not two UTF-8 bytes.
        ("é", 233),
    ],
)
def test_java_string_hashcode_matches_known_values(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


@pytest.mark.parametrize(
    "text", ["console-consumer-12345", "my-application-group", "x" * 100, "grüppe-ü-ß"]
)
def test_java_string_hashcode_wraps_like_int32(text: str) -> None:
    units = [
        int.from_bytes(text.encode("utf-16-be")[i : i + 2]) for i in range(0, 2 * len(text), 2)
    ]
    exact = sum(unit * 31 ** (len(units) - 1 - i) for i, unit in enumerate(units))
    wrapped = exact % 2**32
    assert java_string_hashcode(text) == (wrapped - 2**32 if wrapped >= 2**31 else wrapped)


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


def test_partition_for_uses_absolute_hash_modulo_partitions() -> None:
    assert partition_for("group", 50) == 98629247 % 50 == 47
    assert partition_for("polygenelubricants", 50) == 0
    negative = "console-consumer-12345"
    assert java_string_hashcode(negative) < 0 or java_string_hashcode(negative) >= 0
    assert partition_for(negative, 50) == abs(java_string_hashcode(negative)) % 50
    assert all(0 <= partition_for(f"g{i}", 7) < 7 for i in range(200))
