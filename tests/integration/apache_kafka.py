"""Apache Kafka itself (KRaft, broker and controller in one JVM, from the kafka_2.13 jars in
tests/java/build/tools-libs), for the tests that check krust's clients work against any Kafka
broker, not only krust: a one-node cluster of tests/integration/cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cluster import ApacheKafkaCluster, ClusterError

# One node: every internal topic with one replica.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
}


@dataclass(frozen=True)
class ApacheKafka:
    bootstrap: str


def apache_kafka(workdir: Path) -> Iterator[ApacheKafka]:
    """Format a data directory, run Kafka until the caller is done, stop it."""
    cluster = ApacheKafkaCluster(workdir, size=1, properties=SINGLE_NODE)
    try:
        cluster.start()
        yield ApacheKafka(cluster.bootstrap_servers)
    except ClusterError as error:
        pytest.fail(str(error))
    finally:
        cluster.stop()
