"""Fixtures that run real `krust-broker` processes on free loopback ports.

`broker_factory(overrides)` starts a broker with its own data dir and waits until it answers a
Metadata request; every broker a test started is killed at teardown, whatever happened.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from integration.broker_process import BrokerProcess, shared_broker

# The session-scoped fixtures' users, which pytest-xdist must send to one worker, or every worker
# would start its own: the Spark session (tests/spark) and the clusters, one per kind
# (tests/integration/test_cluster_*.py, parametrized [kafka] and [krust]).
CLUSTER_KIND = re.compile(r"\[(?:.*-)?(kafka|krust)(?:-.*)?\]$")


def xdist_scope(nodeid: str) -> str:
    """The unit of work of `--dist loadscope`: a test's module (its module-scoped brokers start
    once), or the users of a session-scoped Spark session or cluster kind."""
    path, _, test = nodeid.partition("::")
    directories, _, module = path.rpartition("/")
    if "spark" in directories.split("/"):
        return "spark"
    kind = CLUSTER_KIND.search(test)
    if module.startswith("test_cluster_") and kind:
        return f"cluster-{kind[1]}"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadscope` (scripts/test), xdist_scope's units. xdist's own loadgroup
    cannot group by fixture: it renames nodeids, which pytest 9.2 no longer lets it do."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return SharedFixtureScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long units first: handed out last, one would run alone while the other worker
    idles."""
    items.sort(key=lambda item: xdist_scope(item.nodeid) == item.nodeid.partition("::")[0])


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
