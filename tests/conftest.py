"""Fixtures that run real `krust-broker` processes on free loopback ports.

`broker_factory(overrides)` starts a broker with its own data dir and waits until it answers a
Metadata request; every broker a test started is killed at teardown, whatever happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from integration.broker_process import BrokerProcess, shared_broker

# Session-scoped fixtures whose users pytest-xdist must send to one worker, or every worker would
# start its own: the clusters (one per kind), the Spark session and its broker, the plugin's
# kafka_broker.
SESSION_FIXTURE_GROUPS = {
    "shared_cluster": "cluster",
    "spark": "spark",
    "spark_broker": "spark",
    "kafka_broker": "kafka_broker",
}


def xdist_group(item: pytest.Item) -> str:
    """The unit of work of `--dist loadgroup`: the module (its module-scoped brokers start
    once), or, for a test using a session-scoped fixture, every user of that fixture."""
    names = getattr(item, "fixturenames", ())
    for fixture, group in SESSION_FIXTURE_GROUPS.items():
        if fixture in names:
            callspec = getattr(item, "callspec", None)
            param = callspec.params.get(fixture) if callspec else None
            return group if param is None else f"{group}-{param}"
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group tests for `pytest -n 2 --dist loadgroup` (scripts/test); without xdist the
    xdist_group mark is inert. Runs before xdist's own hook, which reads the marks."""
    shared = set()
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = xdist_group(item)
            item.add_marker(pytest.mark.xdist_group(group))
            if group.split("-", 1)[0] in SESSION_FIXTURE_GROUPS.values():
                shared.add(item)
    # The long groups first: handed out last, one would run alone while the other worker idles.
    items.sort(key=lambda item: item not in shared)


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
