"""The cluster launcher (tests/integration/cluster.py) gives both kinds the same nodes: the
same server.properties for Apache Kafka and krust, so switching kind changes nothing else."""

from __future__ import annotations

from pathlib import Path

from integration.cluster import ApacheKafkaCluster, KrustCluster, read_properties


def test_kafka_and_krust_nodes_get_the_same_properties_but_for_ports_and_dirs(
    tmp_path: Path,
) -> None:
    kafka = ApacheKafkaCluster(tmp_path / "kafka", properties={"log.segment.bytes": "1048576"})
    krust = KrustCluster(
        tmp_path / "krust",
        properties={"log.segment.bytes": "1048576"},
        executable=Path("/usr/bin/true"),
    )
    for kafka_node, krust_node in zip(kafka.nodes, krust.nodes, strict=True):
        on_kafka = read_properties(kafka_node.config_path)
        on_krust = read_properties(krust_node.config_path)
        # Kafka's nodes get their cluster id from kafka-storage format; krust's from the config.
        assert on_kafka.keys() | {"cluster.id"} == on_krust.keys()
        assert on_krust["cluster.id"] == read_properties(krust.nodes[0].config_path)["cluster.id"]
        for key in ("process.roles", "node.id", "controller.listener.names", "log.segment.bytes"):
            assert on_kafka[key] == on_krust[key]
        assert on_krust["log.dirs"] == str(krust_node.data_dir)
        assert on_krust["listeners"] == (
            f"PLAINTEXT://{krust_node.bootstrap},CONTROLLER://{krust_node.controller_endpoint}"
        )
        assert krust.command(krust_node)[1:] == ["--config", str(krust_node.config_path)]


def test_every_node_names_all_three_voters_at_their_controller_listeners(
    tmp_path: Path,
) -> None:
    krust = KrustCluster(tmp_path, executable=Path("/usr/bin/true"))
    voters = ",".join(f"{node.node_id}@{node.controller_endpoint}" for node in krust.nodes)
    assert [read_properties(node.config_path)["node.id"] for node in krust.nodes] == ["1", "2", "3"]
    for node in krust.nodes:
        assert read_properties(node.config_path)["controller.quorum.voters"] == voters
    assert len({port for node in krust.nodes for port in (node.port, node.controller_port)}) == 6
