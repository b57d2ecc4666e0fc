"""The cluster fixtures: one three-node cluster per kind for the whole session, made whole again
after every test that uses it.

Every cluster test runs against krust ([krust]). With KRUST_TEST_REFERENCE_KAFKA=1 in the
environment each also runs against three Apache Kafka 4.3 nodes ([kafka]): the reference run,
which shows that a test asserts what Kafka itself does. Run it when a cluster test is added or
changed; the default suite checks krust only (the reference runs took as long again).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

import pytest

from .cluster import ApacheKafkaCluster, Cluster, ClusterError, KrustCluster

REFERENCE_KAFKA = os.environ.get("KRUST_TEST_REFERENCE_KAFKA") == "1"
CLUSTER_KINDS = [pytest.param("krust", id="krust")]
if REFERENCE_KAFKA:
    CLUSTER_KINDS.append(pytest.param("kafka", id="kafka"))


def make_cluster(
    kind: str,
    root: pytest.TempPathFactory,
    properties: Mapping[str, str] | None = None,
    roles: Sequence[str] | None = None,
) -> Cluster:
    workdir = root.mktemp(f"{kind}-cluster")
    if kind == "kafka":
        return ApacheKafkaCluster(workdir, properties=properties, roles=roles)
    return KrustCluster(workdir, properties=properties, roles=roles)


@pytest.fixture(scope="session", params=CLUSTER_KINDS)
def shared_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three combined broker+controller nodes, started once per kind for the session."""
    cluster = make_cluster(request.param, tmp_path_factory)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Iterator[Cluster]:
    """The session's cluster; afterwards paused nodes are resumed and killed ones restarted,
    and a node that exited by itself fails the test."""
    yield shared_cluster
    try:
        shared_cluster.heal()
    except ClusterError as error:
        pytest.fail(str(error))
