"""KIP-848 requests on the wire, as no well-behaved client sends them: ConsumerGroupHeartbeat
with bad epochs, unknown members, unsupported assignors, bad regexes and no subscription get
Kafka's error codes and messages and leave the group as it was; ConsumerGroupDescribe,
DescribeGroups v6 and ListGroups v5 report the group as Kafka does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from .broker_process import BrokerProcess
from .clients.confluent import create_topic
from .groups_support import RawGroupConnection, wait_for_coordinator
from .kafka_cli import CONFIG_COMMAND, ToolRun, run_tool

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
GROUP = "wire-848"


@pytest.fixture(scope="module")
def topic(module_broker: BrokerProcess) -> str:
    create_topic(module_broker.bootstrap, "wire-topic", partitions=3)
    return "wire-topic"


@pytest.fixture
def connection(module_broker: BrokerProcess, topic: str) -> Iterator[RawGroupConnection]:
    connected = RawGroupConnection(module_broker.port)
    wait_for_coordinator(connected, GROUP)
    yield connected
    connected.close()


def heartbeat(
    connection: RawGroupConnection, member_id: str, epoch: int, **fields: object
) -> object:
    request: dict[str, object] = {
        "group_id": GROUP,
        "member_id": member_id,
        "member_epoch": epoch,
        "rebalance_timeout": 30_000 if epoch == 0 else -1,
        "topic_partitions": [] if epoch == 0 else None,
    }
    request.update(fields)
    return connection.send(CONSUMER_GROUP_HEARTBEAT, 1, request)


def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(
    connection: RawGroupConnection,
) -> None:
    joined = heartbeat(connection, "m1", 0, subscribed_topic_names=["wire-topic"])
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (ErrorCode.none, "m1", 1)
    assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1, 2]

    cases = [
        (heartbeat(connection, "m1", 7), ErrorCode.fenced_member_epoch, "greater member epoch (7)"),
        (heartbeat(connection, "ghost", 1), ErrorCode.unknown_member_id, "ghost"),
        (
            heartbeat(
                connection, "m2", 0, subscribed_topic_names=["wire-topic"], server_assignor="sticky"
            ),
            ErrorCode.unsupported_assignor,
            "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
        ),
        (
            heartbeat(connection, "m2", 0, subscribed_topic_regex="wire-(?!x)"),
            ErrorCode.invalid_regular_expression,
            "wire-(?!x)",
        ),
        (
            heartbeat(connection, "m2", 0),
            ErrorCode.invalid_request,
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
            "(re-)joining.",
        ),
        (
            heartbeat(connection, "", 0, subscribed_topic_names=[]),
            ErrorCode.invalid_request,
            "MemberId can't be empty.",
        ),
        (heartbeat(connection, "m1", -3), ErrorCode.invalid_request, "MemberEpoch is invalid."),
    ]
    for response, error, message in cases:
        assert response.error_code is error, response
        assert message in (response.error_message or "")

    [group] = connection.send(
        CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [GROUP], "include_authorized_operations": False}
    ).groups
    assert (group.error_code, group.group_state, group.group_epoch) == (ErrorCode.none, "Stable", 1)
    assert [(m.member_id, m.member_epoch, m.member_type) for m in group.members] == [("m1", 1, 1)]
    assert group.members[0].assignment.topic_partitions[0].topic_name == "wire-topic"
    assert group.assignor_name == "uniform"

    [classic] = connection.send(
        DESCRIBE_GROUPS, 6, {"groups": [GROUP], "include_authorized_operations": False}
    ).groups
    assert (classic.error_code, classic.error_message, classic.group_state) == (
        ErrorCode.group_id_not_found,
        f"Group {GROUP} is not a classic group.",
        "Dead",
    )
    listed = connection.send(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [
        (g.group_id, g.group_type, g.group_state) for g in listed.groups if g.group_id == GROUP
    ] == [(GROUP, "consumer", "Stable")]

    left = heartbeat(connection, "m1", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    empty, missing = connection.send(
        CONSUMER_GROUP_DESCRIBE,
        1,
        {"group_ids": [GROUP, "nothing-here"], "include_authorized_operations": False},
    ).groups
    assert (empty.group_state, empty.group_epoch, empty.members) == ("Empty", 2, ())
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.group_id_not_found,
        "Group nothing-here not found.",
    )


def test_a_group_config_sets_the_heartbeat_interval_members_get(
    connection: RawGroupConnection, module_broker: BrokerProcess
) -> None:
    def alter(configs: str) -> ToolRun:
        return run_tool(
            CONFIG_COMMAND,
            module_broker.bootstrap,
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            "wire-configured",
            "--add-config",
            configs,
        )

    run = alter("consumer.heartbeat.interval.ms=7000,consumer.session.timeout.ms=50000")
    assert run.returncode == 0, run.stderr
    joined = connection.send(
        CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": "wire-configured",
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout": 30_000,
            "topic_partitions": [],
            "subscribed_topic_names": ["wire-topic"],
        },
    )
    assert (joined.error_code, joined.heartbeat_interval) == (
        ErrorCode.none,
        timedelta(milliseconds=7000),
    )
    refused = alter("consumer.session.timeout.ms=1000")
    assert refused.returncode != 0
    assert (
        "consumer.session.timeout.ms must be greater than or equal to "
        "group.consumer.min.session.timeout.ms" in refused.stdout + refused.stderr
    )
