"""Kafka 4.3's own classes read the KIP-848 records krust writes to __consumer_offsets, and krust
reads the ones Kafka writes: field by field, and byte for byte.

tests/java/src/GroupRecordCheck.java drives Kafka's GroupCoordinatorRecordSerde and the generated
record classes' JSON converters (kafka-group-coordinator-4.3.1 in tests/java/build/tools-libs), in
one JVM for the whole module.
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any
from uuid import UUID

import pytest
from krust.group.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecord,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from krust.group.records import decode_record, encode_record

from .clients.java import JAVA_DIR
from .kafka_cli import TOOLS_CLASSPATH

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None, reason="needs `java` to run Kafka's own record classes"
)

CHECK_PROGRAM = JAVA_DIR / "src" / "GroupRecordCheck.java"
JVM_TIMEOUT_S = 120
ORDERS = UUID("3c6b1a2e-8f4d-4b7a-9e21-5d0c7f9a1b42")
PAYMENTS = UUID("ffffffff-0000-4000-8000-00000000abcd")
# Enough names, and long enough ones, for multi-byte unsigned varint lengths.
MANY_TOPICS = tuple(f"topic-{number:03d}-" + "x" * 120 for number in range(200))
# Tagged fields Kafka's JSON converter leaves out when they hold their default.
TAGGED_DEFAULTS: dict[str, object] = {
    "metadata_hash": 0,
    "assignment_timestamp": 0,
    "assignment_epochs": None,
    "classic_member_metadata": None,
}

RECORDS: list[tuple[ConsumerGroupKey, ConsumerGroupValue]] = [
    (ConsumerGroupMetadataKey("group-é"), ConsumerGroupMetadataValue(epoch=1)),
    (
        ConsumerGroupMetadataKey("group"),
        ConsumerGroupMetadataValue(epoch=2_147_483_647, metadata_hash=-1_234_567_890_123),
    ),
    (
        ConsumerGroupPartitionMetadataKey("group"),
        ConsumerGroupPartitionMetadataValue(
            topics=(
                TopicMetadata(ORDERS, "orders", 12, (PartitionMetadata(3, ("rack-a", "rack-b")),)),
                TopicMetadata(PAYMENTS, "payments", 1),
            )
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("group", "member-uuid-1"),
        ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id=None,
            client_id="consumer-1",
            client_host="/127.0.0.1",
            subscribed_topic_names=MANY_TOPICS,
            subscribed_topic_regex=None,
            rebalance_timeout_ms=300_000,
            server_assignor=None,
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("group", "member-uuid-2"),
        ConsumerGroupMemberMetadataValue(
            instance_id="static-1",
            rack_id="rack-a",
            client_id="classic-client",
            client_host="/10.1.2.3",
            subscribed_topic_names=("orders",),
            subscribed_topic_regex="pay(ments)?-.*",
            rebalance_timeout_ms=60_000,
            server_assignor="range",
            classic_member_metadata=ClassicMemberMetadata(
                session_timeout_ms=45_000,
                supported_protocols=(
                    ClassicProtocol("cooperative-sticky", bytes(range(256)) * 2),
                    ClassicProtocol("range", b""),
                ),
            ),
        ),
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("group"),
        ConsumerGroupTargetAssignmentMetadataValue(9),
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("group"),
        ConsumerGroupTargetAssignmentMetadataValue(9, assignment_timestamp=1_764_000_000_000),
    ),
    (
        ConsumerGroupTargetAssignmentMemberKey("group", "member-uuid-1"),
        ConsumerGroupTargetAssignmentMemberValue(
            (TopicPartitions(ORDERS, tuple(range(0, 300, 2))), TopicPartitions(PAYMENTS, ()))
        ),
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("group", "member-uuid-1"),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=10,
            previous_member_epoch=9,
            state=2,
            assigned_partitions=(
                TopicPartitions(ORDERS, (0, 4), assignment_epochs=(3, 10)),
                TopicPartitions(PAYMENTS, (0,)),
            ),
            partitions_pending_revocation=(TopicPartitions(ORDERS, (1,), assignment_epochs=(2,)),),
        ),
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("group", "member-uuid-2"),
        ConsumerGroupCurrentMemberAssignmentValue(0, -1, 0, (), ()),
    ),
    (
        ConsumerGroupRegularExpressionKey("group", "pay(ments)?-.*"),
        ConsumerGroupRegularExpressionValue(
            topics=("payments-eu", "pay-us"), version=-1, timestamp=1_764_000_000_456
        ),
    ),
]
RECORD_IDS = [f"{type(value).__name__}-{index}" for index, (_, value) in enumerate(RECORDS)]


def as_record(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> ConsumerGroupRecord:
    return (key, value)  # type: ignore[return-value]


def camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def kafka_json(item: object) -> Any:
    """The form Kafka's generated JSON converters give a record's key or value."""
    if is_dataclass(item):
        return {
            camel_case(field.name): kafka_json(getattr(item, field.name))
            for field in fields(item)
            if not (
                field.name in TAGGED_DEFAULTS
                and getattr(item, field.name) == TAGGED_DEFAULTS[field.name]
            )
        }
    if isinstance(item, tuple):
        return [kafka_json(element) for element in item]
    if isinstance(item, UUID):
        # Kafka's Uuid.toString: URL-safe base64 without padding.
        return base64.urlsafe_b64encode(item.bytes).rstrip(b"=").decode()
    if isinstance(item, bytes):
        return base64.b64encode(item).decode()
    return item


def record_type(key: ConsumerGroupKey) -> int:
    key_bytes, _ = encode_record(as_record(key, None))
    return int(struct.unpack_from(">h", key_bytes)[0])


def kafka_form(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> dict[str, Any]:
    return {
        "type": record_type(key),
        "key": kafka_json(key),
        "version": None if value is None else 0,
        "value": None if value is None else kafka_json(value),
    }


def decode_command(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> str:
    key_bytes, value_bytes = encode_record(as_record(key, value))
    return f"decode {key_bytes.hex()} {'-' if value_bytes is None else value_bytes.hex()}"


def encode_command(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> str:
    return "encode " + json.dumps(kafka_form(key, value), ensure_ascii=False)


def commands() -> Iterator[str]:
    for key, value in RECORDS:
        yield decode_command(key, value)
        yield decode_command(key, None)
        yield encode_command(key, value)
        yield encode_command(key, None)


@pytest.fixture(scope="module")
def kafka() -> dict[str, str]:
    """Kafka's answer to each command, from one JVM."""
    asked = list(commands())
    done = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", TOOLS_CLASSPATH, str(CHECK_PROGRAM)],
        input="\n".join(asked) + "\n",
        capture_output=True,
        text=True,
        timeout=JVM_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()
    assert len(answers) == len(asked), done.stdout + done.stderr
    return dict(zip(asked, answers, strict=True))


def kafka_decoded(kafka: dict[str, str], command: str) -> dict[str, Any]:
    answer = kafka[command]
    assert not answer.startswith("error:"), answer
    decoded: dict[str, Any] = json.loads(answer)
    return decoded


@pytest.mark.parametrize(("key", "value"), RECORDS, ids=RECORD_IDS)
def test_kafka_reads_every_field_krust_writes(
    kafka: dict[str, str], key: ConsumerGroupKey, value: ConsumerGroupValue
) -> None:
    assert kafka_decoded(kafka, decode_command(key, value)) == kafka_form(key, value)
    assert kafka_decoded(kafka, decode_command(key, None)) == kafka_form(key, None)


@pytest.mark.parametrize(("key", "value"), RECORDS, ids=RECORD_IDS)
def test_kafka_writes_the_same_bytes_and_krust_reads_them(
    kafka: dict[str, str], key: ConsumerGroupKey, value: ConsumerGroupValue
) -> None:
    for written in (value, None):
        answer = kafka[encode_command(key, written)]
        assert not answer.startswith("error:"), answer
        key_hex, value_hex = answer.split(" ")
        kafka_key = bytes.fromhex(key_hex)
        kafka_value = None if value_hex == "-" else bytes.fromhex(value_hex)
        assert (kafka_key, kafka_value) == encode_record(as_record(key, written))
        assert decode_record(kafka_key, kafka_value) == (key, written)
