"""pytest fixtures for testing Kafka code against a real krust broker, registered through the
`pytest11` entry point when krust is installed:

- `kafka_broker` (session): a started `krust.Broker`; with pytest-xdist each worker process
  has its own session, hence its own broker on its own free port.
- `kafka_topic` (function): the name of a fresh topic, created on that broker; one partition
  unless the test is marked `@pytest.mark.kafka_topic(partitions=3, config={...})`.
- `--krust-port PORT`: the port that broker serves clients on (default: a free one; with
  pytest-xdist only one worker can have it).
- `--krust-config KEY=VALUE` (repeatable): a Kafka config key for that broker, checked against
  krust's config table when pytest starts. The broker's groups start rebalancing at once
  (`group.initial.rebalance.delay.ms=0`, as in Kafka's own test harness) unless a
  `--krust-config` says otherwise.

A failed test that used the broker gets a "krust broker log" section in its report. Nothing
is started unless a test asks for a fixture.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from krust.testing.embedded import Broker

LOG_SECTION = "krust broker log"
LOG_TAIL_LINES = 200
# Kafka's limit is 249 characters; leave room for the unique suffix.
_TOPIC_PREFIX_CHARS = 200
MAX_PORT = 65535

_CONFIG = pytest.StashKey[dict[str, str]]()
_PORT = pytest.StashKey[int]()
# A group's first rebalance waits 3 s by default (Kafka's production setting); a test's does not.
FIXTURE_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
_BROKER = pytest.StashKey["Broker"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("krust", "krust broker (kafka_broker and kafka_topic fixtures)")
    group.addoption(
        "--krust-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka config key of the kafka_broker fixture's broker (repeatable)",
    )
    group.addoption(
        "--krust-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the port the kafka_broker fixture's broker serves clients on (default: a free one)",
    )


def pytest_configure(config: pytest.Config) -> None:
    from krust.testing.embedded import OWNED_KEYS

    pairs: list[str] = config.getoption("krust_config")
    parsed = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise pytest.UsageError(f"--krust-config expects KEY=VALUE, got {pair!r}")
        parsed[key.strip()] = value
    for key in sorted(parsed.keys() & OWNED_KEYS.keys()):
        hint = "; use --krust-port" if OWNED_KEYS[key] == "port" else " (a temporary directory)"
        raise pytest.UsageError(f"--krust-config: {key} is set by the fixture{hint}")
    port: int = config.getoption("krust_port")
    if not 0 <= port <= MAX_PORT:
        raise pytest.UsageError(f"--krust-port: {port} is not a port (0 to {MAX_PORT})")
    config.stash[_PORT] = port
    if parsed:
        _check_with_the_config_table(parsed)
    config.stash[_CONFIG] = parsed
    config.addinivalue_line(
        "markers",
        "kafka_topic(partitions=1, config=None): how the kafka_topic fixture creates the test's "
        "topic (partition count, topic config keys)",
    )


def _check_with_the_config_table(values: dict[str, str]) -> None:
    """An unknown key or a refused value stops pytest at once, as krust-broker refuses it at
    start-up (the log directories checked are a scratch one unless log.dirs is given)."""
    from krust.config.broker import load_config
    from krust.config.errors import ConfigError

    with tempfile.TemporaryDirectory() as scratch:
        overrides = [f"log.dirs={scratch}", *(f"{key}={value}" for key, value in values.items())]
        try:
            load_config(None, env={}, overrides=overrides)
        except ConfigError as error:
            raise pytest.UsageError(f"--krust-config: {error}") from None


@pytest.fixture(scope="session")
def kafka_broker(pytestconfig: pytest.Config) -> Iterator[Broker]:
    """A krust broker for the whole session (per xdist worker), stopped at its end."""
    from krust.testing.embedded import Broker

    given: dict[str, str] = pytestconfig.stash[_CONFIG]
    broker = Broker(port=pytestconfig.stash[_PORT], config={**FIXTURE_DEFAULTS, **given})
    pytestconfig.stash[_BROKER] = broker
    with broker:
        yield broker


@pytest.fixture
def kafka_topic(kafka_broker: Broker, request: pytest.FixtureRequest) -> str:
    """A new topic on `kafka_broker`, named after the test: one partition, or as the test's
    `kafka_topic` marker says."""
    marker = request.node.get_closest_marker("kafka_topic")
    options = {} if marker is None else dict(marker.kwargs)
    if marker is not None and marker.args:
        raise pytest.UsageError("kafka_topic marker: use keywords (partitions=..., config=...)")
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:_TOPIC_PREFIX_CHARS]
    return kafka_broker.create_topic(f"{prefix}-{uuid.uuid4().hex[:8]}", **options)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    broker = item.config.stash.get(_BROKER, None)
    used_broker = "kafka_broker" in getattr(item, "fixturenames", ())
    if report.failed and used_broker and broker is not None:
        tail = "\n".join(broker.log.splitlines()[-LOG_TAIL_LINES:])
        report.sections.append((LOG_SECTION, tail))
    return report
