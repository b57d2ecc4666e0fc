"""pytest fixtures for testing Kafka code against a real krust broker, registered through the
`pytest11` entry point when krust is installed:

- `kafka_broker` (session): a started `krust.Broker`; with pytest-xdist each worker process
  has its own session, hence its own broker on its own free port.
- `kafka_topic` (function): the name of a fresh topic, created on that broker; one partition
  unless the test is marked `@pytest.mark.kafka_topic(partitions=3, config={...})`.
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

_CONFIG = pytest.StashKey[dict[str, str]]()
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


def pytest_configure(config: pytest.Config) -> None:
    pairs: list[str] = config.getoption("krust_config")
    parsed = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise pytest.UsageError(f"--krust-config expects KEY=VALUE, got {pair!r}")
        parsed[key.strip()] = value
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
    broker = Broker(config={**FIXTURE_DEFAULTS, **given})
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
