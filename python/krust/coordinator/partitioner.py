"""Which partition of a coordinator's internal topic owns a key (a group id, a transactional id):
Kafka's own mapping, `abs(javaStringHashCode(key)) % partitions`, so that clients, Kafka's tools
and krust agree on the coordinator."""

from __future__ import annotations

_INT32_MASK = 0xFFFFFFFF


def java_string_hashcode(value: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    code_units = value.encode("utf-16-be", "surrogatepass")
    result = 0
    for index in range(0, len(code_units), 2):
        result = (result * 31 + (code_units[index] << 8 | code_units[index + 1])) & _INT32_MASK
    return result - (1 << 32) if result & 0x80000000 else result


def kafka_abs(value: int) -> int:
    """Kafka's Utils.abs: the absolute value, except Integer.MIN_VALUE maps to 0 (not itself)."""
    return 0 if value == -(1 << 31) else abs(value)


def partition_for(key: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(key)) % num_partitions
