"""The controller quorum's and the listeners' roles: Kafka's KRaft config rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from krust.config.broker import BrokerConfig
from krust.config.errors import ConfigError
from krust.config.listeners import Listener
from krust.config.roles import Voter

from .test_controller import make_config

CLUSTER = (
    "node.id=2",
    "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names=CONTROLLER",
    "controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:9093,3@127.0.0.1:29093",
)


def cluster_config(tmp_path: Path, *overrides: str) -> BrokerConfig:
    return make_config([tmp_path], *CLUSTER, *overrides)


def refused(tmp_path: Path, *overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        cluster_config(tmp_path, *overrides)
    return caught.value


def test_voters_name_this_node_on_a_controller_listener_port(tmp_path: Path) -> None:
    config = cluster_config(tmp_path)
    assert config["controller.quorum.voters"] == [
        Voter(1, "127.0.0.1", 19093),
        Voter(2, "127.0.0.1", 9093),
        Voter(3, "127.0.0.1", 29093),
    ]
    # Without voters the node is a quorum of one and needs no controller listener.
    assert make_config([tmp_path])["controller.quorum.voters"] == []
    # __consumer_offsets gets Kafka's replication factor in a cluster, 1 on a lone node.
    assert config["offsets.topic.replication.factor"] == 3
    assert make_config([tmp_path])["offsets.topic.replication.factor"] == 1
    error = refused(tmp_path, "node.id=4")
    assert error.key == "controller.quorum.voters" and "node.id 4" in error.problem
    error = refused(tmp_path, "controller.quorum.voters=2@127.0.0.1:9092")
    assert error.key == "controller.quorum.voters" and "port of a controller" in error.problem
    error = refused(tmp_path, "controller.quorum.voters=2@127.0.0.1:9093,2@127.0.0.1:9094")
    assert error.key == "controller.quorum.voters" and "more than once" in error.problem


def test_a_lone_node_may_go_without_the_default_controller_listener(tmp_path: Path) -> None:
    # listeners given without CONTROLLER: the default names no listener, and the quorum of one
    # is reached on the first listener, as before.
    assert make_config([tmp_path])["controller.listener.names"] == []
    # Named explicitly, a controller listener must exist.
    with pytest.raises(ConfigError) as caught:
        make_config([tmp_path], "controller.listener.names=CONTROLLER")
    assert caught.value.key == "controller.listener.names"


def test_controller_listeners_are_not_advertised(tmp_path: Path) -> None:
    config = cluster_config(tmp_path)
    assert config["advertised.listeners"] == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    # A controller listener missing from the protocol map speaks PLAINTEXT, as in Kafka.
    assert config["listener.security.protocol.map"]["CONTROLLER"] == "PLAINTEXT"
    error = refused(tmp_path, "advertised.listeners=PLAINTEXT://h:9092,CONTROLLER://h:9093")
    assert error.key == "advertised.listeners" and "controller listener" in error.problem
    mapped = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    error = refused(tmp_path, "controller.listener.names=", mapped)
    assert error.key == "controller.listener.names"
    error = refused(tmp_path, "controller.listener.names=QUORUM", mapped)
    assert error.key == "controller.listener.names" and "QUORUM" in error.problem


def test_the_inter_broker_listener_follows_kafkas_rules(tmp_path: Path) -> None:
    assert cluster_config(tmp_path)["inter.broker.listener.name"] == "PLAINTEXT"
    two = "listeners=PLAINTEXT://127.0.0.1:9092,REPLICATION://127.0.0.1:9094," + (
        "CONTROLLER://127.0.0.1:9093"
    )
    protocols = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT"
    config = cluster_config(tmp_path, two, protocols, "inter.broker.listener.name=replication")
    assert config["inter.broker.listener.name"] == "REPLICATION"
    error = refused(
        tmp_path, "inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=SSL"
    )
    assert error.key == "inter.broker.listener.name" and "only one of" in error.problem
    error = refused(tmp_path, "inter.broker.listener.name=CONTROLLER")
    assert "controller listener" in error.problem
    error = refused(tmp_path, "security.inter.broker.protocol=SSL")
    assert error.key == "security.inter.broker.protocol"
    assert "advertised.listeners" in error.problem


def test_a_node_of_a_cluster_must_be_given_the_clusters_id(tmp_path: Path) -> None:
    from krust.controller.meta_properties import format_log_dirs

    dirs = [str(tmp_path)]
    with pytest.raises(ConfigError) as caught:
        format_log_dirs(dirs, 2, None, shared=True)
    assert caught.value.key == "cluster.id" and "same id on every node" in caught.value.problem
    chosen = "MkU3OEVBNTcwNTJENDM2Qk"
    assert format_log_dirs(dirs, 2, chosen, shared=True) == chosen
    # Formatted once, the stored id is used.
    assert format_log_dirs(dirs, 2, None, shared=True) == chosen


BROKER_ONLY = (
    "process.roles=broker",
    "node.id=4",
    "listeners=PLAINTEXT://127.0.0.1:9095",
)


def test_a_broker_only_node_observes_the_voters(tmp_path: Path) -> None:
    config = cluster_config(tmp_path, *BROKER_ONLY)
    assert config["process.roles"] == ["broker"]
    assert [voter.node_id for voter in config["controller.quorum.voters"]] == [1, 2, 3]
    assert config["offsets.topic.replication.factor"] == 3
    error = refused(tmp_path, *BROKER_ONLY, "node.id=2")
    assert error.key == "controller.quorum.voters" and "must not be one of" in error.problem
    error = refused(tmp_path, *BROKER_ONLY, "controller.quorum.voters=")
    assert error.key == "controller.quorum.voters"
    error = refused(tmp_path, *BROKER_ONLY, "controller.listener.names=")
    assert error.key == "controller.listener.names"
    listening = "listeners=PLAINTEXT://127.0.0.1:9095,CONTROLLER://127.0.0.1:9096"
    error = refused(tmp_path, *BROKER_ONLY, listening)
    assert error.key == "controller.listener.names" and "just the broker" in error.problem


CONTROLLER_ONLY = (
    "process.roles=controller",
    "listeners=CONTROLLER://127.0.0.1:9093",
)


def test_a_controller_only_node_listens_on_controller_listeners_only(tmp_path: Path) -> None:
    config = cluster_config(tmp_path, *CONTROLLER_ONLY)
    assert config["advertised.listeners"] == []
    assert config["inter.broker.listener.name"] is None
    error = refused(tmp_path, *CONTROLLER_ONLY, "node.id=4")
    assert error.key == "controller.quorum.voters" and "node.id 4" in error.problem
    error = refused(tmp_path, "process.roles=controller")
    assert error.key == "listeners" and "PLAINTEXT" in error.problem
    error = refused(tmp_path, *CONTROLLER_ONLY, "advertised.listeners=CONTROLLER://h:9093")
    assert error.key == "advertised.listeners"
    error = refused(tmp_path, *CONTROLLER_ONLY, "controller.quorum.voters=")
    assert error.key == "controller.quorum.voters"


def test_a_voter_entry_of_another_machine_is_a_duplicate_node_id(tmp_path: Path) -> None:
    # node.id 2's entry names 127.0.0.2 while its controller listener is on 127.0.0.1: the
    # config was copied from node 2 (or node.id was), so two nodes would claim voter 2.
    error = refused(
        tmp_path, "controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.2:9093,3@127.0.0.1:29093"
    )
    assert error.key == "controller.quorum.voters"
    assert "node.id 2" in error.problem and "2@127.0.0.2:9093 is not this node" in error.problem
    # On every interface, the entry must name an address of this machine (TEST-NET-3 is not).
    every_interface = "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093"
    error = refused(tmp_path, every_interface, "controller.quorum.voters=2@203.0.113.7:9093")
    assert "node.id 2" in error.problem and "another node has node.id 2" in error.problem
    config = cluster_config(tmp_path, every_interface, "controller.quorum.voters=2@localhost:9093")
    assert config["controller.quorum.voters"] == [Voter(2, "localhost", 9093)]
