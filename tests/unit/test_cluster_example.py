"""examples/cluster's three server.properties describe one cluster: distinct node ids, ports
and data directories, one voter list naming each node's own CONTROLLER listener, and every key
the cluster tests give their nodes (tests/integration/cluster.py)."""

from __future__ import annotations

from pathlib import Path

from integration.cluster import Node, read_properties, server_properties

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster"


NODES = [read_properties(EXAMPLE / f"server-{n}.properties") for n in (1, 2, 3)]


def test_the_nodes_have_distinct_ids_ports_and_data_dirs() -> None:
    assert [node["node.id"] for node in NODES] == ["1", "2", "3"]
    endpoints = [e.split("://")[1] for node in NODES for e in node["listeners"].split(",")]
    assert len(set(endpoints)) == len(endpoints) == 6
    assert len({node["log.dirs"] for node in NODES}) == 3


def test_every_node_has_the_same_voters_each_at_its_own_controller_listener() -> None:
    assert len({node["controller.quorum.voters"] for node in NODES}) == 1
    voters = dict(voter.split("@") for voter in NODES[0]["controller.quorum.voters"].split(","))
    for node in NODES:
        assert node["controller.listener.names"] == "CONTROLLER"
        assert f"CONTROLLER://{voters[node['node.id']]}" in node["listeners"].split(",")
        assert node["advertised.listeners"] in node["listeners"].split(",")


def test_the_nodes_set_every_key_the_cluster_tests_set() -> None:
    tested = Node(1, 9092, 19091, Path("node"))
    wanted = set(server_properties(tested, [tested]))
    for node in NODES:
        assert wanted <= set(node)
        assert node["process.roles"] == "broker,controller"
