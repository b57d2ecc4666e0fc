"""Process roles, the controller quorum and the listeners' roles, checked as Kafka's
KafkaConfig checks them in KRaft mode (docs/cluster.md).

With no `controller.quorum.voters` the node is a quorum of one on its own (krust's default),
reached on its CONTROLLER listener as in Kafka's single-node config, or on its first listener
when it has no controller listener; with voters it must say which listener the quorum speaks on
(`controller.listener.names`) and which one brokers replicate over
(`inter.broker.listener.name`)."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from typing import Any, NamedTuple

from krust.config.errors import ConfigError
from krust.config.listeners import SECURITY_PROTOCOLS

VOTER = re.compile(r"(\d+)@\[?([0-9A-Za-z\-%._:]+)\]?:(\d+)")


class Voter(NamedTuple):
    """One entry of `controller.quorum.voters`: id@host:port."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}"


def parse_voters(entries: list[str]) -> list[Voter]:
    """The voters of entries the key's check found well-formed."""
    matches = [VOTER.fullmatch(entry) for entry in entries]
    voters = [Voter(int(m[1]), m[2], int(m[3])) for m in matches if m is not None]
    ids = [voter.node_id for voter in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError("controller.quorum.voters", "a node id is listed more than once")
    return voters


def default_controller_listeners(values: dict[str, Any]) -> None:
    """`controller.listener.names` left at its default (CONTROLLER, Kafka's single-node
    name) on a node with the controller role names only the listeners it has: a node given
    `listeners=PLAINTEXT://:9092` alone is a quorum of one served on that listener, as
    before the default had a controller listener. A broker-only node keeps the default: it
    names the controllers' listener, which the broker itself does not have."""
    if "controller" not in values["process.roles"]:
        return
    names = {listener.name for listener in values["listeners"]}
    values["controller.listener.names"] = [
        name for name in values["controller.listener.names"] if name in names
    ]


def resolve_roles(values: dict[str, Any]) -> None:
    """Check the roles, the voters and the listener roles; parse the voters. Runs after the
    listeners are parsed and before advertised listeners are derived from them."""
    roles = set(values["process.roles"])
    node_id = values["node.id"]
    voters = parse_voters(values["controller.quorum.voters"])
    values["controller.quorum.voters"] = voters
    controller_names = values["controller.listener.names"]
    listener_names = {listener.name for listener in values["listeners"]}
    if "controller" not in roles:
        _check_broker_only(values, node_id, voters)
        return
    if "broker" not in roles:
        _check_controller_only(values, voters, listener_names)
    if voters and node_id not in {voter.node_id for voter in voters}:
        raise ConfigError(
            "controller.quorum.voters",
            f"process.roles contains controller, so node.id {node_id} must be one of the "
            f"voters ({', '.join(map(str, voters))})",
        )
    if voters and not controller_names:
        raise ConfigError(
            "controller.listener.names",
            "must name the listener the controller quorum uses when controller.quorum.voters "
            "is set",
        )
    missing = [name for name in controller_names if name not in listener_names]
    if missing:
        raise ConfigError(
            "controller.listener.names",
            f"{', '.join(missing)} must be among the listeners of a node with the controller role",
        )
    for name in controller_names:
        protocol = values["listener.security.protocol.map"][name]
        if protocol != "PLAINTEXT":
            raise ConfigError(
                "controller.listener.names",
                f"{name} uses {protocol}: krust's controller quorum speaks PLAINTEXT only",
            )
    if values["offsets.topic.replication.factor"] is None:
        # Kafka's default is 3; a quorum of one has one broker, so krust's is 1 there.
        values["offsets.topic.replication.factor"] = 3 if voters else 1
    # The same for __transaction_state (Kafka: replication 3, min.isr 2).
    if values["transaction.state.log.replication.factor"] is None:
        values["transaction.state.log.replication.factor"] = 3 if voters else 1
    if values["transaction.state.log.min.isr"] is None:
        values["transaction.state.log.min.isr"] = 2 if voters else 1
    if voters:
        own = next(voter for voter in voters if voter.node_id == node_id)
        ports = {
            listener.port for listener in values["listeners"] if listener.name in controller_names
        }
        if own.port not in ports:
            raise ConfigError(
                "controller.quorum.voters",
                f"node.id {node_id}'s entry {own} must use the port of a controller listener "
                f"({', '.join(controller_names)}); if it is another node's, this node.id is a "
                "duplicate",
            )
        hosts = {
            listener.host
            for listener in values["listeners"]
            if listener.name in controller_names and listener.port == own.port
        }
        if not _is_this_node(own.host, hosts):
            raise ConfigError(
                "controller.quorum.voters",
                f"node.id {node_id}'s entry {own} is not this node (its controller listener is "
                f"on {', '.join(sorted(h or '*' for h in hosts))}): another node has node.id "
                f"{node_id}; every node needs its own node.id and its own entry",
            )


def _addresses(host: str) -> set[str] | None:
    """The IP addresses `host` names; None when it does not resolve here."""
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except OSError:
        return None


def _is_local(address: str) -> bool:
    """Whether this machine has `address` (it can bind it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def _is_this_node(host: str, listener_hosts: set[str]) -> bool:
    """Whether a voter entry's host can be this node, whose controller listener binds
    `listener_hosts` ("" or a wildcard: every interface). A copied config whose node.id is
    another node's names that node's machine or address. A host that does not resolve here
    is not refused: the quorum's connection errors will name it."""
    addresses = _addresses(host)
    if addresses is None:
        return True
    wildcards = {"", "0.0.0.0", "::"}
    if listener_hosts & wildcards:
        return any(_is_local(address) for address in addresses)
    bound = set().union(*(_addresses(h) or {h} for h in listener_hosts))
    return bool(addresses & bound)


def is_broker(values: Mapping[str, Any]) -> bool:
    """Whether the node serves clients and hosts partitions (process.roles has broker)."""
    return "broker" in values["process.roles"]


def _check_controller_only(
    values: dict[str, Any], voters: list[Voter], listener_names: set[str]
) -> None:
    """A controller-only node votes in the quorum and listens on controller listeners only."""
    if not voters:
        raise ConfigError(
            "controller.quorum.voters",
            "a node with process.roles=controller must be one of the quorum's voters",
        )
    others = sorted(listener_names - set(values["controller.listener.names"]))
    if others:
        raise ConfigError(
            "listeners",
            f"{', '.join(others)}: a node with just the controller role listens only on the "
            "controller listeners (controller.listener.names)",
        )


def _check_broker_only(values: dict[str, Any], node_id: int, voters: list[Voter]) -> None:
    """A broker-only node is an observer of the voters' quorum (Kafka's KRaft checks)."""
    if not voters:
        raise ConfigError(
            "controller.quorum.voters",
            "a node with process.roles=broker needs the controller quorum's voters",
        )
    if node_id in {voter.node_id for voter in voters}:
        raise ConfigError(
            "controller.quorum.voters",
            f"process.roles is broker, so node.id {node_id} must not be one of the voters "
            f"({', '.join(map(str, voters))})",
        )
    controller_names = values["controller.listener.names"]
    if not controller_names:
        raise ConfigError(
            "controller.listener.names",
            "must name the listener the controllers listen on, also on a broker-only node",
        )
    own = [listener.name for listener in values["listeners"] if listener.name in controller_names]
    if own:
        raise ConfigError(
            "controller.listener.names",
            f"{', '.join(own)} must not be among the listeners of a node with just the broker role",
        )
    protocols = values["listener.security.protocol.map"]
    for name in controller_names:
        protocol = protocols.get(name, name if name in SECURITY_PROTOCOLS else None)
        if protocol != "PLAINTEXT":
            raise ConfigError(
                "controller.listener.names",
                f"{name} uses {protocol or 'no protocol in listener.security.protocol.map'}: "
                "krust's controller quorum speaks PLAINTEXT only",
            )
    if values["offsets.topic.replication.factor"] is None:
        values["offsets.topic.replication.factor"] = 3
    if values["transaction.state.log.replication.factor"] is None:
        values["transaction.state.log.replication.factor"] = 3
    if values["transaction.state.log.min.isr"] is None:
        values["transaction.state.log.min.isr"] = 2


def resolve_inter_broker_listener(values: dict[str, Any]) -> None:
    """`inter.broker.listener.name`, or the listener named by `security.inter.broker.protocol`
    (Kafka's rule), which must be advertised and not a controller listener. With neither set,
    krust takes the PLAINTEXT listener, else the first advertised one."""
    if not is_broker(values):
        values["inter.broker.listener.name"] = None
        return
    advertised = {listener.name: listener for listener in values["advertised.listeners"]}
    name = values["inter.broker.listener.name"]
    protocol = values["security.inter.broker.protocol"]
    if name is not None and protocol is not None:
        raise ConfigError(
            "inter.broker.listener.name",
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set",
        )
    key = "inter.broker.listener.name" if name is not None else "security.inter.broker.protocol"
    if name is None:
        name = protocol if protocol is not None else "PLAINTEXT"
        if protocol is None and name not in advertised:
            name = next(iter(advertised))
    name = name.upper()
    if name in values["controller.listener.names"]:
        raise ConfigError(key, f"{name} is a controller listener (controller.listener.names)")
    if name not in advertised:
        raise ConfigError(key, f"{name} must be a listener name defined in advertised.listeners")
    if values["controller.quorum.voters"]:
        used = values["listener.security.protocol.map"][name]
        if used != "PLAINTEXT":
            raise ConfigError(
                key, f"{name} uses {used}: krust brokers replicate over PLAINTEXT only"
            )
    values["inter.broker.listener.name"] = name
