"""Fixtures of the integration tests that are not in tests/conftest.py: the clusters
(cluster_fixtures.py), here so every test module can ask for `cluster`."""

from .cluster_fixtures import cluster, shared_cluster

__all__ = ["cluster", "shared_cluster"]
