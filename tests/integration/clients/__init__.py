"""One adapter per real Kafka client, all with the same produce/consume shape.

Consumers never join a group: consumer groups are not supported yet, so each consumer is
assigned the partition by hand, starts at offset 0 and commits nothing.
"""

from __future__ import annotations

from typing import Protocol

from ..records import Consumed, ProducedBatch, Record, now_ms, sample_records
from .aiokafka_client import AiokafkaClient
from .confluent import ConfluentKafkaClient
from .java import JavaClient
from .kafka_python import KafkaPythonClient
from .kcat import KcatClient

CONSUME_TIMEOUT_S = 30.0


class KafkaClient(Protocol):
    name: str
    # Whether the client can give each record its own headers and CreateTime.
    per_record_headers: bool
    sets_timestamps: bool

    def produce(
        self, bootstrap: str, topic: str, partition: int, records: list[Record], codec: str
    ) -> None:
        """Send all records to one partition; returns once every one is acknowledged."""

    def consume(
        self, bootstrap: str, topic: str, partition: int, count: int, timeout_s: float
    ) -> list[Consumed]:
        """Read `count` records from offset 0 of one partition (fewer if `timeout_s` runs out)."""


ALL_CLIENTS: tuple[KafkaClient, ...] = (
    ConfluentKafkaClient(),
    KafkaPythonClient(),
    AiokafkaClient(),
    KcatClient(),
    JavaClient(),
)

CLIENTS_BY_NAME = {client.name: client for client in ALL_CLIENTS}


def produce_samples(
    client: KafkaClient, bootstrap: str, topic: str, *, count: int, codec: str, partition: int = 0
) -> ProducedBatch:
    """Produce sample records the client can express; returns them with the produce window."""
    records = sample_records(
        count,
        tag=f"{client.name}/{codec}",
        per_record_headers=client.per_record_headers,
        with_timestamps=client.sets_timestamps,
    )
    started_ms = now_ms()
    client.produce(bootstrap, topic, partition, records, codec)
    return ProducedBatch(records, started_ms, now_ms())


def consume_all(
    client: KafkaClient, bootstrap: str, topic: str, count: int, partition: int = 0
) -> list[Consumed]:
    return client.consume(bootstrap, topic, partition, count, CONSUME_TIMEOUT_S)
