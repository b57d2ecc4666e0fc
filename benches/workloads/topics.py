"""Creating benchmark topics through the Admin API (both brokers serve CreateTopics)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    timeout_s: float = 120.0,
    configs: dict[str, str] | None = None,
    replication_factor: int = 1,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=configs or {},
    )
    futures = admin.create_topics(
        [topic],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    futures[name].result(timeout=timeout_s)
