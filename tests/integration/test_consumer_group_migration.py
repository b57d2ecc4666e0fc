"""Both protocols in one group (KIP-848) with real clients: classic consumers in a consumer group,
a rolling upgrade from classic to consumer-protocol members while records flow, and the
downgrade back to a classic group when the last consumer-protocol member leaves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .broker_process import BrokerProcess, shared_broker
from .clients.confluent import create_topic
from .clients.java_group_member import JavaGroupMember
from .groups_support import (
    CONSUMER_GROUP_BROKER_OVERRIDES,
    GroupMember,
    SteadyProducer,
    assert_each_number_once,
    produce_numbered,
    wait_for_exact_cover,
    wait_for_numbers,
    wait_until,
)
from .kafka_cli import CONSUMER_GROUP_COMMAND, run_tool

PARTITIONS = 6
BATCH = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from shared_broker(tmp_path_factory.mktemp("migration"), CONSUMER_GROUP_BROKER_OVERRIDES)


def group_type(broker: BrokerProcess, group: str) -> str:
    """The group's type as Kafka's kafka-consumer-groups --list --type shows it."""
    listed = run_tool(CONSUMER_GROUP_COMMAND, broker.bootstrap, "--list", "--type")
    assert listed.returncode == 0, listed.stderr
    types = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:]}
    return types[group]


def start(
    library: str, broker: BrokerProcess, group: str, topic: str, protocol: str
) -> GroupMember:
    return GroupMember(library, broker.bootstrap, group, topic, protocol=protocol).start()


def test_classic_and_consumer_members_share_one_group(broker: BrokerProcess) -> None:
    topic, group = "mixed-topic", "mixed-group"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    # The consumer-protocol member makes it a consumer group; the classic ones join it.
    members: list[GroupMember | JavaGroupMember] = [
        start("confluent-kafka", broker, group, topic, "consumer")
    ]
    wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
    # Java's classic consumer offers two protocols (range, cooperative-sticky) with
    # subscription v3; kafka-python one, with v0.
    members += [
        start("kafka-python", broker, group, topic, "classic"),
        JavaGroupMember(broker.bootstrap, group, topic, protocol="classic").start(),
    ]
    try:
        wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
        assert group_type(broker, group) == "Consumer"
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers(members, numbers)  # type: ignore[arg-type]
        assert_each_number_once(members, numbers)  # type: ignore[arg-type]
        for m in members:
            assert {d.partition for d in m.delivered} <= m.assignment
    finally:
        for m in members:
            m.close()


def test_a_rolling_upgrade_turns_a_classic_group_into_a_consumer_group(
    broker: BrokerProcess,
) -> None:
    topic, group = "rolling-topic", "rolling-group"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    members = [start("confluent-kafka", broker, group, topic, "classic") for _ in range(3)]
    gone: list[GroupMember] = []
    try:
        wait_for_exact_cover(members, PARTITIONS)
        assert group_type(broker, group) == "Classic"
        with SteadyProducer(broker.bootstrap, topic, PARTITIONS) as producer:
            for _ in range(3):
                # One classic member at a time is replaced by a consumer-protocol one.
                members.append(start("confluent-kafka", broker, group, topic, "consumer"))
                wait_for_exact_cover(members, PARTITIONS)
                replaced = members.pop(0)
                replaced.close()
                gone.append(replaced)
                wait_for_exact_cover(members, PARTITIONS)
        assert all(m.protocol == "consumer" for m in members)
        assert group_type(broker, group) == "Consumer"
        # Nothing was lost on the way (a partition that moved may repeat a few records).
        wait_for_numbers([*members, *gone], set(producer.produced))
    finally:
        for m in members:
            m.close()


def test_the_last_consumer_member_leaving_downgrades_the_group(broker: BrokerProcess) -> None:
    topic, group = "downgrade-topic", "downgrade-group"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    modern = start("confluent-kafka", broker, group, topic, "consumer")
    wait_for_exact_cover([modern], PARTITIONS)
    classic = [start("kafka-python", broker, group, topic, "classic") for _ in range(2)]
    try:
        wait_for_exact_cover([modern, *classic], PARTITIONS)
        assert group_type(broker, group) == "Consumer"
        modern.close()
        wait_until(lambda: group_type(broker, group) == "Classic", 30, "the downgrade")
        wait_for_exact_cover(classic, PARTITIONS)
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        # The classic group goes on: the records from now on reach its members.
        wait_for_numbers(classic, numbers)
        wait_until(lambda: group_type(broker, group) == "Classic", 5, "a classic group")
    finally:
        for m in classic:
            m.close()
