"""The cluster fixtures: one three-node cluster per kind for the whole session, made whole again
after every test that uses it.

Every cluster test is parametrized over the kinds in CLUSTER_KINDS; krust's parametrizations
are skipped until KRUST_FORMS_CLUSTERS is True (the one switch).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pytest

from .cluster import ApacheKafkaCluster, Cluster, ClusterError, KrustCluster

# krust refuses process.roles=broker,controller with several controller.quorum.voters until
# issue 12's cluster parts are merged and wired; then set this to True, and every cluster test
# runs against krust too.
KRUST_FORMS_CLUSTERS = True
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
