"""The cluster fixtures: one three-node cluster per kind for the whole session, made whole again
after every test that uses it, and the active controller as DescribeQuorum reports it.

Every cluster test is parametrized over the kinds in CLUSTER_KINDS; krust's parametrizations
are skipped until KRUST_FORMS_CLUSTERS is True (the one switch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from .cluster import ApacheKafkaCluster, Cluster, ClusterError, KrustCluster

# krust refuses process.roles=broker,controller with several controller.quorum.voters until
# issue 12's cluster parts are merged and wired; then set this to True, and every cluster test
# runs against krust too.
KRUST_FORMS_CLUSTERS = False
KRUST_SKIP_REASON = (
    "krust does not form a multi-node cluster yet (issue 12): "
    "set KRUST_FORMS_CLUSTERS in tests/integration/cluster_fixtures.py once it does"
)
CLUSTER_KINDS = [
    pytest.param("kafka", id="kafka"),
    pytest.param(
        "krust",
        id="krust",
        marks=pytest.mark.skipif(not KRUST_FORMS_CLUSTERS, reason=KRUST_SKIP_REASON),
    ),
]
QUORUM_TIMEOUT_S = 60.0


def make_cluster(kind: str, root: pytest.TempPathFactory) -> Cluster:
    workdir = root.mktemp(f"{kind}-cluster")
    return ApacheKafkaCluster(workdir) if kind == "kafka" else KrustCluster(workdir)


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


def active_controller(cluster: Cluster, timeout_s: float = QUORUM_TIMEOUT_S) -> int:
    """The quorum's leader (DescribeQuorum through a live broker), once there is one."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=cluster.live_bootstrap(), request_timeout_ms=5000
            )
            try:
                quorum = admin.describe_metadata_quorum()
            finally:
                admin.close()
            leader = int(quorum["topics"][0]["partitions"][0]["leader_id"])
            if leader in cluster.live_node_ids():
                return leader
        except (KafkaError, ClusterError, OSError) as error:
            last_error = error
        time.sleep(0.2)
    raise ClusterError(f"no live active controller within {timeout_s:.0f} s: {last_error!r}")
