"""Listing, describing and deleting groups and their offsets through the admin clients."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import GroupSubscribedToTopicError, NoError

from .broker_process import shared_broker
from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic
from .clients.java import JAVA_DIR
from .groups_support import GROUP_BROKER_OVERRIDES, GroupMember, wait_for_exact_cover

PARTITIONS = 4
ACTIVE, EMPTY = "admin-active", "admin-empty"
ACTIVE_TOPIC, EMPTY_TOPIC = "admin-active-topic", "admin-empty-topic"
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed
EMPTY_GROUP_OFFSETS = {0: 2, 1: 4}


@dataclass
class Groups:
    bootstrap: str
    admin: AdminClient
    members: list[GroupMember]


@contextmanager
def started_groups(bootstrap: str) -> Iterator[Groups]:
    """A Stable group of two members on ACTIVE_TOPIC, and an Empty group holding offsets."""
    create_topic(bootstrap, ACTIVE_TOPIC, partitions=PARTITIONS)
    create_topic(bootstrap, EMPTY_TOPIC, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    members = [
        GroupMember("confluent-kafka", bootstrap, ACTIVE, ACTIVE_TOPIC).start() for _ in range(2)
    ]
    try:
        wait_for_exact_cover(members, PARTITIONS)
        # Committing to a group nobody joined creates it, Empty. (Only now: the coordinator
        # answers COORDINATOR_LOAD_IN_PROGRESS while it loads the new __consumer_offsets, and
        # librdkafka's admin client does not retry that.)
        alter_offsets(admin, EMPTY, EMPTY_TOPIC, EMPTY_GROUP_OFFSETS)
        yield Groups(bootstrap, admin, members)
    finally:
        for member in members:
            member.close()


@pytest.fixture
def groups(broker_factory) -> Iterator[Groups]:
    """The groups on a broker of their own, for a test that changes them."""
    with started_groups(broker_factory(GROUP_BROKER_OVERRIDES).bootstrap) as started:
        yield started


@pytest.fixture(scope="module")
def unchanged_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Groups]:
    """The groups, shared by the tests that only list and describe them."""
    workdir = tmp_path_factory.mktemp("groups-broker")
    for broker in shared_broker(workdir, GROUP_BROKER_OVERRIDES):
        with started_groups(broker.bootstrap) as started:
            yield started


def alter_offsets(admin: AdminClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p, offset) for p, offset in offsets.items()]
    )
    altered = admin.alter_consumer_group_offsets([request])[group].result(ADMIN_TIMEOUT_S)
    assert [str(tp.error) for tp in altered.topic_partitions if tp.error] == []


def committed_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    listed = admin.list_consumer_group_offsets([request])[group].result(ADMIN_TIMEOUT_S)
    return {tp.partition: tp.offset for tp in listed.topic_partitions}


def listed_group_states(admin: AdminClient, states: set[ConsumerGroupState]) -> dict[str, object]:
    listing = admin.list_consumer_groups(states=states, request_timeout=ADMIN_TIMEOUT_S)
    result = listing.result(ADMIN_TIMEOUT_S)
    assert not result.errors
    return {group.group_id: group.state for group in result.valid}


def test_list_groups_filtered_by_state(unchanged_groups) -> None:
    stable = listed_group_states(unchanged_groups.admin, {ConsumerGroupState.STABLE})
    empty = listed_group_states(unchanged_groups.admin, {ConsumerGroupState.EMPTY})
    every = listed_group_states(unchanged_groups.admin, set())

    assert stable == {ACTIVE: ConsumerGroupState.STABLE}
    assert empty == {EMPTY: ConsumerGroupState.EMPTY}
    assert every == {ACTIVE: ConsumerGroupState.STABLE, EMPTY: ConsumerGroupState.EMPTY}


def test_describe_groups_shows_members_and_their_assignments(unchanged_groups) -> None:
    described = unchanged_groups.admin.describe_consumer_groups([ACTIVE, EMPTY])
    active = described[ACTIVE].result(ADMIN_TIMEOUT_S)
    empty = described[EMPTY].result(ADMIN_TIMEOUT_S)

    assert active.state == ConsumerGroupState.STABLE
    assert active.partition_assignor == "range"
    assert not active.is_simple_consumer_group
    assigned = {
        member.member_id: {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        for member in active.members
    }
    assert len(assigned) == 2
    assert sorted(p for owned in assigned.values() for p in owned) == [
        (ACTIVE_TOPIC, p) for p in range(PARTITIONS)
    ]
    by_assignment = {frozenset(owned) for owned in assigned.values()}
    member_views = {
        frozenset((ACTIVE_TOPIC, p) for p in member.assignment)
        for member in unchanged_groups.members
    }
    assert by_assignment == member_views
    assert all(member.host for member in active.members)

    assert empty.state == ConsumerGroupState.EMPTY
    assert empty.members == []


def test_delete_groups_refuses_an_active_group_and_deletes_an_empty_one(groups) -> None:
    deleted = groups.admin.delete_consumer_groups([ACTIVE, EMPTY])

    with pytest.raises(KafkaException) as refused:
        deleted[ACTIVE].result(ADMIN_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    deleted[EMPTY].result(ADMIN_TIMEOUT_S)

    assert listed_group_states(groups.admin, set()) == {ACTIVE: ConsumerGroupState.STABLE}
    assert committed_offsets(groups.admin, EMPTY, EMPTY_TOPIC) == dict.fromkeys(
        range(PARTITIONS), NO_OFFSET
    )
    for member in groups.members:
        member.check()  # the refused delete left the active group alone


def test_alter_list_and_delete_committed_offsets(groups) -> None:
    assert committed_offsets(groups.admin, EMPTY, EMPTY_TOPIC) == {
        0: 2,
        1: 4,
        2: NO_OFFSET,
        3: NO_OFFSET,
    }
    alter_offsets(groups.admin, EMPTY, EMPTY_TOPIC, {1: 9, 3: 1})
    assert committed_offsets(groups.admin, EMPTY, EMPTY_TOPIC) == {
        0: 2,
        1: 9,
        2: NO_OFFSET,
        3: 1,
    }

    kafka_python_admin = KafkaAdminClient(bootstrap_servers=groups.bootstrap)
    try:
        deleted = kafka_python_admin.delete_group_offsets(
            EMPTY, [KafkaPythonTopicPartition(EMPTY_TOPIC, 1)]
        )
        assert deleted == {KafkaPythonTopicPartition(EMPTY_TOPIC, 1): NoError}
        # Kafka keeps the offsets of topics a live group subscribes to (KIP-496).
        refused = kafka_python_admin.delete_group_offsets(
            ACTIVE, [KafkaPythonTopicPartition(ACTIVE_TOPIC, 0)]
        )
        assert refused == {KafkaPythonTopicPartition(ACTIVE_TOPIC, 0): GroupSubscribedToTopicError}
    finally:
        kafka_python_admin.close()

    assert committed_offsets(groups.admin, EMPTY, EMPTY_TOPIC) == {
        0: 2,
        1: NO_OFFSET,
        2: NO_OFFSET,
        3: 1,
    }


# Run with Java's single-file source launcher: no build step beyond the kafka-clients jars.
JAVA_GROUP_ADMIN = """
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;

public final class GroupAdmin {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(config)) {
            for (GroupListing group :
                    admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
                System.out.println("listed " + group.groupId() + " " + group.groupState().get());
            }
            List<String> described = List.of(args).subList(1, args.length);
            for (ConsumerGroupDescription group :
                    admin.describeConsumerGroups(described).all().get().values()) {
                TreeSet<String> partitions = new TreeSet<>();
                for (MemberDescription member : group.members()) {
                    member.assignment().topicPartitions().forEach(tp -> partitions.add("" + tp));
                }
                System.out.println("described " + group.groupId() + " " + group.groupState() + " "
                        + group.members().size() + " " + group.partitionAssignor() + " "
                        + String.join(",", partitions));
            }
        }
    }
}
"""


def test_java_admin_lists_and_describes_groups(unchanged_groups, tmp_path: Path) -> None:
    source = tmp_path / "GroupAdmin.java"
    source.write_text(JAVA_GROUP_ADMIN)
    classpath = str(JAVA_DIR / "build" / "libs" / "*")
    command = ["java", "-XX:TieredStopAtLevel=1", "-cp", classpath, str(source)]
    result = subprocess.run(
        [*command, unchanged_groups.bootstrap, ACTIVE, EMPTY],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr[-2000:]

    partitions = ",".join(sorted(f"{ACTIVE_TOPIC}-{p}" for p in range(PARTITIONS)))
    assert sorted(result.stdout.splitlines()) == [
        f"described {ACTIVE} Stable 2 range {partitions}",
        f"described {EMPTY} Empty 0  ",
        f"listed {ACTIVE} Stable",
        f"listed {EMPTY} Empty",
    ]
