"""KIP-848's consumer group protocol (group.protocol=consumer) with real clients: the broker
assigns, members reconcile without stopping the others, a dead member's partitions move after
its session timeout, offsets and groups survive a restart, regexes follow new topics, and
Kafka's kafka-consumer-groups describes the group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from .broker_process import BrokerProcess, shared_broker
from .clients.confluent import create_topic
from .clients.java_group_member import JavaGroupMember
from .groups_support import (
    CONSUMER_GROUP_BROKER_OVERRIDES,
    CONSUMER_GROUP_SESSION_TIMEOUT_MS,
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
KINDS = ("confluent-kafka", "java")

Member = GroupMember | JavaGroupMember


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from shared_broker(tmp_path_factory.mktemp("kip848"), CONSUMER_GROUP_BROKER_OVERRIDES)


def member(kind: str, broker: BrokerProcess, group: str, topic: str) -> Member:
    if kind == "java":
        return JavaGroupMember(broker.bootstrap, group, topic).start()
    return GroupMember(kind, broker.bootstrap, group, topic, protocol="consumer").start()


def start_group(
    kind: str, broker: BrokerProcess, name: str, count: int
) -> tuple[str, str, list[Member]]:
    """A fresh topic of PARTITIONS partitions and `count` members of group `name` reading it."""
    topic, group = f"{name}-{kind}", f"{name}-group-{kind}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    return topic, group, [member(kind, broker, group, topic) for _ in range(count)]


def close_all(members: list[Member]) -> None:
    for m in members:
        m.close()


@pytest.mark.parametrize("kind", KINDS)
def test_members_share_partitions_and_consume_each_record_once(
    broker: BrokerProcess, kind: str
) -> None:
    topic, group, members = start_group(kind, broker, "shared-848", 3)
    try:
        wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers(members, numbers)  # type: ignore[arg-type]
        assert_each_number_once(members, numbers)  # type: ignore[arg-type]
        for m in members:
            assert {d.partition for d in m.delivered} <= m.assignment

        described = run_tool(
            CONSUMER_GROUP_COMMAND, broker.bootstrap, "--describe", "--group", group
        )
        assert described.returncode == 0, described.stderr
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        assert sorted(int(row[2]) for row in rows) == list(range(PARTITIONS))
        assert len({row[6] for row in rows}) == 3  # three members own them
        state = run_tool(
            CONSUMER_GROUP_COMMAND, broker.bootstrap, "--describe", "--state", "--group", group
        )
        assert state.returncode == 0, state.stderr
        assert "Stable" in state.stdout and "uniform" in state.stdout
    finally:
        close_all(members)


@pytest.mark.parametrize("kind", KINDS)
def test_a_member_joins_and_leaves_while_the_others_keep_consuming(
    broker: BrokerProcess, kind: str
) -> None:
    topic, group, members = start_group(kind, broker, "steady-848", 2)
    try:
        wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
        with SteadyProducer(broker.bootstrap, topic, PARTITIONS) as producer:
            wait_until(lambda: all(m.delivered for m in members), 30, "both members consuming")
            before = [len(m.delivered) for m in members]
            kept = [set(m.assignment) for m in members]
            joining = member(kind, broker, group, topic)
            members.append(joining)
            wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
            # While the newcomer was brought in, the others never stopped: each received
            # records, from partitions it kept all along.
            for m, was, partitions in zip(members[:2], before, kept, strict=True):
                during = m.delivered[was:]
                assert during, f"{m} received nothing while a member joined"
                assert {d.partition for d in during} & partitions & m.assignment
            before = [len(m.delivered) for m in members[1:]]
            leaving = members.pop(0)
            leaving.close()
            wait_for_exact_cover(members, PARTITIONS)  # type: ignore[arg-type]
            for m, was in zip(members, before, strict=True):
                assert m.delivered[was:], f"{m} received nothing while a member left"
        produced = set(producer.produced)
        wait_for_numbers([*members, leaving], produced)  # type: ignore[arg-type]
    finally:
        close_all(members)


def test_a_killed_members_partitions_move_after_its_session_timeout(broker: BrokerProcess) -> None:
    topic, group = "killed-848", "killed-group-848"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    survivor = member("confluent-kafka", broker, group, topic)
    doomed = JavaGroupMember(broker.bootstrap, group, topic).start()
    try:
        wait_for_exact_cover([survivor, doomed], PARTITIONS)  # type: ignore[list-item]
        orphaned = doomed.assignment
        doomed.kill()
        killed_at = time.monotonic()
        wait_until(lambda: survivor.assignment == frozenset(range(PARTITIONS)), 30, "takeover")
        # Not before the broker's session timeout fenced the dead member.
        assert time.monotonic() - killed_at >= CONSUMER_GROUP_SESSION_TIMEOUT_MS / 1000 - 1
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers([survivor], numbers)  # type: ignore[list-item]
        assert orphaned <= {d.partition for d in survivor.delivered}
    finally:
        survivor.close()


def consume(bootstrap: str, group: str, topic: str, wanted: int, commit: bool) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while len(seen) < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
    if commit:
        consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def test_committed_offsets_and_the_group_survive_a_broker_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, CONSUMER_GROUP_BROKER_OVERRIDES).start()
    try:
        topic, group, java_group = "restart-848", "restart-group-848", "restart-java-848"
        create_topic(broker.bootstrap, topic, partitions=1)
        produce_numbered(broker.bootstrap, topic, range(20), 1)
        assert consume(broker.bootstrap, group, topic, 20, commit=True) == list(range(20))
        java = JavaGroupMember(broker.bootstrap, java_group, topic).start()
        wait_for_numbers([java], set(range(20)))  # type: ignore[list-item]
        java.close()  # the Java consumer commits on close
        broker.stop()
        broker.restart()
        produce_numbered(broker.bootstrap, topic, range(20, 30), 1)
        # Only what came after the committed offset.
        assert consume(broker.bootstrap, group, topic, 10, commit=True) == list(range(20, 30))
        java = JavaGroupMember(broker.bootstrap, java_group, topic).start()
        wait_for_numbers([java], set(range(20, 30)))  # type: ignore[list-item]
        java.close()
        assert java.numbers() == list(range(20, 30))
        listed = run_tool(CONSUMER_GROUP_COMMAND, broker.bootstrap, "--list", "--type", "--state")
        assert listed.returncode == 0, listed.stderr
        rows = {line.split()[0]: set(line.split()[1:]) for line in listed.stdout.splitlines()}
        assert rows[group] == {"Consumer", "Empty"}
    finally:
        broker.kill9()


def test_a_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "regex-848-a", partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "regex-group-848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(["^regex-848-.*"])
    try:
        seen: set[str] = set()

        def poll_until(topic: str) -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.topic())
            return topic in seen

        produce_numbered(broker.bootstrap, "regex-848-a", range(4), 2)
        wait_until(lambda: poll_until("regex-848-a"), 30, "records of the first topic")
        create_topic(broker.bootstrap, "regex-848-b", partitions=2)
        produce_numbered(broker.bootstrap, "regex-848-b", range(4), 2)
        wait_until(lambda: poll_until("regex-848-b"), 60, "records of the topic created later")
    finally:
        consumer.close()


def test_a_regex_subscription_gets_double_underscore_topics(broker: BrokerProcess) -> None:
    """Kafka's group coordinator (TopicRegexResolver) matches a regex against every topic name;
    a `__`-prefixed topic that is not krust's own is a user's topic like any other."""
    create_topic(broker.bootstrap, "__regex-848-private", partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "regex-group-848-underscores",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["^__regex-848-.*"])
    try:
        seen: list[int] = []

        def poll_until_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                assert message.topic() == "__regex-848-private"
                seen.append(int(message.value()))
            return sorted(seen) == list(range(4))

        produce_numbered(broker.bootstrap, "__regex-848-private", range(4), 2)
        wait_until(poll_until_all, 30, "records of the __-prefixed topic")
    finally:
        consumer.close()
