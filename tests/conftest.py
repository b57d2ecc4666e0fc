"""Fixtures that run real `krust-broker` processes on free loopback ports.

`broker_factory(overrides)` starts a broker with its own data dir and waits until it answers a
Metadata request; every broker a test started is killed at teardown, whatever happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from integration.broker_process import BrokerProcess, shared_broker


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with importlib.resources APIs Python deprecates.
    config.addinivalue_line(
        "filterwarnings", r"ignore:.*is deprecated. Use files\(\) instead:DeprecationWarning"
    )


BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """`broker_factory(overrides=None, *, env=None, config_file=None, open_file_limit=None)`
    -> a started broker."""
    started: list[BrokerProcess] = []

    def start(
        overrides: Mapping[str, str | None] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        config_file: Path | None = None,
        open_file_limit: int | None = None,
    ) -> BrokerProcess:
        workdir = tmp_path / f"broker-{len(started)}"
        workdir.mkdir()
        broker = BrokerProcess(workdir, overrides, env, config_file, open_file_limit)
        started.append(broker)
        return broker.start()

    yield start
    crashes = [crash for broker in started if (crash := broker.unexpected_exit())]
    for broker in started:
        broker.kill9()
    if crashes:
        pytest.fail("\n".join(crashes))


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A broker with default settings, for one test."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module (each uses its own topics)."""
    yield from shared_broker(tmp_path_factory.mktemp("module-broker"))
