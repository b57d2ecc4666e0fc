"""Which nodes build their Python services before the port opens (docs/python-services.md,
"Start-up order"): the default single node does not; a node of a quorum of several voters and
a node with any plugin configured do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from krust.config.broker import BrokerConfig, load_config
from krust.runtime.server import needs_python_before_port

BASE = ["listeners=PLAINTEXT://127.0.0.1:9092"]


def config(tmp_path: Path, *overrides: str) -> BrokerConfig:
    return load_config(None, {}, [*BASE, f"log.dirs={tmp_path}", *overrides])


def test_a_default_node_opens_its_port_without_its_services(tmp_path: Path) -> None:
    assert not needs_python_before_port(config(tmp_path))


@pytest.mark.parametrize(
    "overrides",
    [
        ["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"],
        ["client.quota.callback.class=quota_plugin:Callback"],
        [
            "listeners=PLAINTEXT://127.0.0.1:9092,CALLBACK://127.0.0.1:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CALLBACK:SASL_PLAINTEXT",
            "listener.name.callback.sasl.enabled.mechanisms=PLAIN",
            "listener.name.callback.plain.sasl.server.callback.handler.class=plain:Callback",
        ],
        [
            "process.roles=broker,controller",
            "controller.quorum.voters=1@127.0.0.1:9094,2@127.0.0.1:9095",
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ],
    ],
    ids=["authorizer", "quota-callback", "plain-callback", "quorum-of-two"],
)
def test_plugins_and_clusters_build_their_services_before_the_port(
    tmp_path: Path, overrides: list[str]
) -> None:
    assert needs_python_before_port(config(tmp_path, *overrides))


def test_the_pre_port_path_imports_neither_asyncio_nor_kio() -> None:
    """What keeps an empty broker's start-up short: the replay before the port runs without
    the services' event loop and the protocol codecs."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, krust.runtime.cli, krust.runtime.server\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'asyncio', 'kio', 're2'}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert loaded.strip() == "[]"
