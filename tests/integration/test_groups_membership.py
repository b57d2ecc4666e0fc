"""Consumer groups with real clients: partitions shared exactly once, records consumed exactly
once, and survivors taking over from a member that leaves, dies, or mixes libraries."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic
from .groups_support import (
    COOPERATIVE_STICKY,
    GROUP_BROKER_OVERRIDES,
    HEARTBEAT_INTERVAL_MS,
    LIBRARIES,
    RANGE,
    SESSION_TIMEOUT_MS,
    GroupMember,
    RawGroupConnection,
    assert_each_number_once,
    produce_numbered,
    wait_for_coordinator,
    wait_for_exact_cover,
    wait_for_numbers,
    wait_until,
)

PARTITIONS = 6
BATCH = 60
TESTS_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def broker(broker_factory):
    return broker_factory(GROUP_BROKER_OVERRIDES)


def start_members(
    libraries: list[str], broker, group: str, topic: str, assignor: str = RANGE
) -> list[GroupMember]:
    return [
        GroupMember(library, broker.bootstrap, group, topic, assignor=assignor).start()
        for library in libraries
    ]


def close_all(members: list[GroupMember]) -> None:
    for member in members:
        member.close()


@pytest.mark.parametrize("library", LIBRARIES)
def test_three_members_share_partitions_and_survivors_take_over_after_close(
    broker, library
) -> None:
    topic, group = f"shared-{library}", f"group-{library}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    members = start_members([library] * 3, broker, group, topic)
    try:
        wait_for_exact_cover(members, PARTITIONS)

        first = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, first, PARTITIONS)
        wait_for_numbers(members, first)
        assert_each_number_once(members, first)
        for member in members:
            assert {d.partition for d in member.delivered} <= member.assignment

        leaving, survivors = members[0], members[1:]
        orphaned = leaving.assignment
        leaving.close()
        wait_for_exact_cover(survivors, PARTITIONS)
        assert orphaned <= {p for m in survivors for p in m.assignment}

        second = set(range(BATCH, 2 * BATCH))
        produce_numbered(broker.bootstrap, topic, second, PARTITIONS)
        wait_for_numbers(survivors, second)
        # The leaver committed on close: nobody re-reads what it had consumed.
        assert_each_number_once(members, first | second)
        taken_over = {d.partition for m in survivors for d in m.delivered if d.number in second}
        assert orphaned <= taken_over
    finally:
        close_all(members)


class ChildMember:
    """A confluent-kafka member in its own process (groups_support.main), to be killed -9."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.assignment: frozenset[int] = frozenset()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "integration.groups_support", bootstrap, group, topic],
            cwd=TESTS_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read_assignments, daemon=True).start()

    def _read_assignments(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            listed = "".join(line.split()[1:])  # "assigned 0,3" or "assigned"
            self.assignment = frozenset(int(p) for p in listed.split(",") if p)

    def kill9(self) -> None:
        self._process.kill()
        self._process.wait(10)


def test_survivors_take_over_after_the_session_timeout_of_a_killed_member(broker) -> None:
    topic, group = "shared-killed", "group-killed"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    child = ChildMember(broker.bootstrap, group, topic)
    members = start_members(["confluent-kafka"] * 2, broker, group, topic)
    try:
        wait_until(lambda: bool(child.assignment), 30, "the child process to get partitions")
        wait_for_exact_cover(members, PARTITIONS, extra_owned=lambda: child.assignment)
        orphaned = child.assignment

        child.kill9()  # no LeaveGroup: only its session expiry tells the coordinator
        killed_at = time.monotonic()
        wait_for_exact_cover(members, PARTITIONS, timeout_s=SESSION_TIMEOUT_MS / 1000 + 20)
        took_over_after_s = time.monotonic() - killed_at

        assert took_over_after_s >= SESSION_TIMEOUT_MS / 1000 - 2, (
            f"partitions moved after {took_over_after_s:.1f} s, before the session could expire"
        )
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers(members, numbers)
        taken_over = {d.partition for m in members for d in m.delivered if d.number in numbers}
        assert orphaned <= taken_over
    finally:
        child.kill9()
        close_all(members)


@pytest.mark.parametrize(
    ("libraries", "assignor"),
    [
        (["confluent-kafka", "kafka-python", "aiokafka"], RANGE),
        (["confluent-kafka", "kafka-python", "confluent-kafka"], COOPERATIVE_STICKY),
    ],
    ids=["range", "cooperative-sticky"],
)
def test_members_of_different_libraries_share_one_group(broker, libraries, assignor) -> None:
    topic, group = f"mixed-{assignor}", f"group-mixed-{assignor}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    members = start_members(libraries, broker, group, topic, assignor)
    try:
        wait_for_exact_cover(members, PARTITIONS)
        admin = admin_client(broker.bootstrap)  # must outlive the future
        described = admin.describe_consumer_groups([group])[group].result(ADMIN_TIMEOUT_S)
        assert described.partition_assignor == assignor

        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers(members, numbers)
        assert_each_number_once(members, numbers)
        for member in members:
            assert {d.partition for d in member.delivered} <= member.assignment
    finally:
        close_all(members)


def test_a_static_member_restarting_within_its_session_gets_its_partitions_back_silently(
    broker,
) -> None:
    topic, group = "shared-static", "group-static"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    static = GroupMember(
        "confluent-kafka", broker.bootstrap, group, topic, instance_id="static-a"
    ).start()
    other = GroupMember("confluent-kafka", broker.bootstrap, group, topic).start()
    restarted = None
    try:
        wait_for_exact_cover([static, other], PARTITIONS)
        static_partitions, other_partitions = static.assignment, other.assignment
        other_assign_calls = other.assign_calls

        static.close()  # KIP-345: a static member sends no LeaveGroup
        restarted = GroupMember(
            "confluent-kafka", broker.bootstrap, group, topic, instance_id="static-a"
        ).start()
        wait_until(
            lambda: restarted.assignment == static_partitions,
            SESSION_TIMEOUT_MS / 1000,
            "the restarted static member to get its partitions back",
        )
        time.sleep(2 * HEARTBEAT_INTERVAL_MS / 1000)  # a rebalance would reach `other` by now

        assert other.assign_calls == other_assign_calls, "the other member was rebalanced"
        assert other.assignment == other_partitions
        admin = admin_client(broker.bootstrap)  # must outlive the future
        described = admin.describe_consumer_groups([group])[group].result(ADMIN_TIMEOUT_S)
        assert len(described.members) == 2
        by_instance = {
            member.group_instance_id: {tp.partition for tp in member.assignment.topic_partitions}
            for member in described.members
        }
        assert by_instance["static-a"] == static_partitions
    finally:
        close_all([m for m in (static, other, restarted) if m is not None])


JOIN_GROUP, SYNC_GROUP = 11, 14
INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT = 23, 25, 26


def join_request(group: str, session_timeout_ms: int, protocols: list[str]) -> dict:
    return {
        "group_id": group,
        "session_timeout": session_timeout_ms,
        "rebalance_timeout": SESSION_TIMEOUT_MS,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": name, "metadata": b""} for name in protocols],
    }


def test_bad_join_and_sync_requests_get_kafka_errors_and_groups_keep_working(broker) -> None:
    topic = "after-bad-joins"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    connection = RawGroupConnection(broker.port)
    try:
        wait_for_coordinator(connection, "raw-group")
        no_protocols = connection.send(JOIN_GROUP, 5, join_request("raw-group", 6000, []))
        too_short = connection.send(JOIN_GROUP, 5, join_request("raw-group", 10, ["range"]))
        too_long = connection.send(JOIN_GROUP, 5, join_request("raw-group", 3_600_000, ["range"]))
        # v3 (before KIP-394) joins at once; the group completes its first generation alone.
        joined = connection.send(JOIN_GROUP, 3, join_request("raw-group", 6000, ["range"]))
        stranger_sync = connection.send(
            SYNC_GROUP,
            3,
            {
                "group_id": "raw-group",
                "generation_id": joined.generation_id,
                "member_id": "not-a-member",
                "assignments": [],
            },
        )
    finally:
        connection.close()

    assert no_protocols.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert too_short.error_code == INVALID_SESSION_TIMEOUT
    assert too_long.error_code == INVALID_SESSION_TIMEOUT
    assert joined.error_code == 0
    assert stranger_sync.error_code == UNKNOWN_MEMBER_ID

    assert broker.running
    members = start_members(["confluent-kafka"] * 2, broker, "after-bad-joins", topic)
    try:
        wait_for_exact_cover(members, PARTITIONS)
        numbers = set(range(BATCH))
        produce_numbered(broker.bootstrap, topic, numbers, PARTITIONS)
        wait_for_numbers(members, numbers)
        assert_each_number_once(members, numbers)
    finally:
        close_all(members)
