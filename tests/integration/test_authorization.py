"""Authorization with real clients (principal User:ANONYMOUS until authentication exists): the
built-in ACL authorizer with ACLs managed by the Admin API and Kafka's kafka-acls, denials as
clients report them, and plugins that fail."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ConfigResource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from .broker_process import BrokerProcess
from .clients.confluent import admin_client, create_topic
from .kafka_cli import run_tool
from .test_config_cli import assert_config_error_naming, run_broker_cli

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
ANONYMOUS = "User:ANONYMOUS"
TIMEOUT_S = 15.0
# Everything is open until an ACL names a resource: the test (User:ANONYMOUS) can then manage
# ACLs, since none names the cluster.
OPEN_UNTIL_ACLS = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.DENY,
) -> AclBinding:
    return AclBinding(
        resource_type, name, ResourcePatternType.LITERAL, ANONYMOUS, "*", operation, permission
    )


def describable_but(
    resource_type: ResourceType, name: str, *denied: AclOperation
) -> list[AclBinding]:
    """DENY ACLs, plus the ALLOW DESCRIBE that any ACL on the resource otherwise takes away
    (allow.everyone.if.no.acl.found applies only to resources no ACL names)."""
    allow = acl(resource_type, name, AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    return [allow, *(acl(resource_type, name, op) for op in denied)]


def produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    """The delivery error of one record confluent-kafka produces (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    producer.produce(topic, b"value", on_delivery=lambda error, _: outcome.append(error))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def first_consumer_error(consumer: Consumer) -> KafkaError:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            return message.error()
    pytest.fail("the consumer reported no error")


def test_a_denied_producer_and_consumer_get_authorization_errors(
    broker_factory,
) -> None:
    broker: BrokerProcess = broker_factory(OPEN_UNTIL_ACLS)
    create_topic(broker.bootstrap, "secret")
    assert produce_error(broker.bootstrap, "secret") is None
    admin = admin_client(broker.bootstrap)
    acls = describable_but(ResourceType.TOPIC, "secret", AclOperation.WRITE, AclOperation.READ)
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)

    # Without a restart: the cached ALLOW of the first produce was forgotten.
    error = produce_error(broker.bootstrap, "secret")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=10_000)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("secret", b"value").get(TIMEOUT_S)
    producer.close()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
    consumer.assign([TopicPartition("secret", 0, 0)])
    assert first_consumer_error(consumer).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer.close()

    # Deleting the ACLs opens the topic again, still without a restart.
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        "secret",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([wanted])[wanted].result(TIMEOUT_S)
    assert {binding.operation for binding in deleted} == {
        AclOperation.DESCRIBE,
        AclOperation.WRITE,
        AclOperation.READ,
    }
    assert produce_error(broker.bootstrap, "secret") is None


def test_a_denied_group_join_gets_group_authorization_failed(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(OPEN_UNTIL_ACLS)
    create_topic(broker.bootstrap, "events")
    admin = admin_client(broker.bootstrap)
    for future in admin.create_acls(
        describable_but(ResourceType.GROUP, "blocked", AclOperation.READ)
    ).values():
        future.result(TIMEOUT_S)

    for protocol in ("classic", "consumer"):
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "blocked",
                "group.protocol": protocol,
            }
        )
        consumer.subscribe(["events"])
        error = first_consumer_error(consumer)
        # librdkafka's KIP-848 consumer reports it as a fatal error carrying the broker's.
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED or (
            error.code() == KafkaError._FATAL and "Group authorization failed" in error.str()
        ), error
        consumer.close()

    # KIP-848: a member may subscribe only to topics it may describe.
    for future in admin.create_acls(
        [acl(ResourceType.TOPIC, "hidden", AclOperation.DESCRIBE)]
    ).values():
        future.result(TIMEOUT_S)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "open", "group.protocol": "consumer"}
    )
    consumer.subscribe(["hidden"])
    error = first_consumer_error(consumer)
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED or (
        error.code() == KafkaError._FATAL and "Topic authorization failed" in error.str()
    ), error
    consumer.close()

    kafka_python = KafkaConsumer(
        "events", bootstrap_servers=broker.bootstrap, group_id="blocked", consumer_timeout_ms=2000
    )
    with pytest.raises(GroupAuthorizationFailedError):
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            kafka_python.poll(500)
    kafka_python.close()


def acl_command(bootstrap: str, *args: str) -> str:
    done = run_tool(ACL_COMMAND, bootstrap, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_acls_adds_lists_and_removes_acls_that_survive_a_restart(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(OPEN_UNTIL_ACLS)
    create_topic(broker.bootstrap, "audit")
    acl_command(
        broker.bootstrap,
        "--add",
        "--deny-principal",
        ANONYMOUS,
        "--operation",
        "Write",
        "--topic",
        "audit",
    )
    assert "operation=WRITE, permissionType=DENY" in acl_command(
        broker.bootstrap, "--list", "--topic", "audit"
    )
    error = produce_error(broker.bootstrap, "audit")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    broker.stop()
    broker.restart()
    listed = acl_command(broker.bootstrap, "--list", "--topic", "audit")
    assert f"principal={ANONYMOUS}, host=*, operation=WRITE, permissionType=DENY" in listed
    error = produce_error(broker.bootstrap, "audit")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    acl_command(
        broker.bootstrap,
        "--remove",
        "--force",
        "--deny-principal",
        ANONYMOUS,
        "--operation",
        "Write",
        "--topic",
        "audit",
    )
    assert "WRITE" not in acl_command(broker.bootstrap, "--list", "--topic", "audit")
    assert produce_error(broker.bootstrap, "audit") is None


def test_without_an_authorizer_acl_apis_answer_security_disabled_and_every_operation_is_authorized(
    broker: BrokerProcess,
) -> None:
    admin = admin_client(broker.bootstrap)
    binding = acl(ResourceType.TOPIC, "any", AclOperation.READ)
    with pytest.raises(Exception, match=r"SECURITY_DISABLED|[Ss]ecurity features are disabled"):
        admin.create_acls([binding])[binding].result(TIMEOUT_S)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }


def test_authorized_operations_are_what_the_acls_allow(broker_factory) -> None:
    broker: BrokerProcess = broker_factory({"authorizer.class.name": STANDARD, "super.users": ""})
    admin = admin_client(broker.bootstrap)
    # Without any ACL and without allow.everyone, nothing is allowed: not even DESCRIBE.
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert not cluster.authorized_operations


FAILING_PLUGIN = """
import time
from krust.plugins.authorizer import AuthorizationResult


class Flaky:
    def configure(self, configs):
        self.delay_s = float(configs["flaky.delay.s"])

    def start(self, context):
        pass

    def close(self):
        pass

    def authorize(self, context, actions):
        names = {action.resource.name for action in actions}
        if "boom" in names:
            raise RuntimeError("policy database unreachable")
        if "slow" in names:
            time.sleep(self.delay_s)
        return [AuthorizationResult.ALLOWED for _ in actions]
"""


def test_a_slow_or_raising_plugin_denies_and_the_broker_keeps_serving(
    broker_factory, tmp_path: Path
) -> None:
    (tmp_path / "flaky_plugin.py").write_text(textwrap.dedent(FAILING_PLUGIN))
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    broker: BrokerProcess = broker_factory(
        {
            "authorizer.class.name": "flaky_plugin:Flaky",
            "authorizer.call.timeout.ms": "300",
            "flaky.delay.s": "1",
        },
        env={"PYTHONPATH": pythonpath},
    )
    create_topic(broker.bootstrap, "fine")
    assert produce_error(broker.bootstrap, "fine") is None
    for _ in range(2):
        error = produce_error(broker.bootstrap, "boom")
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    error = produce_error(broker.bootstrap, "slow")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker.bootstrap, "fine") is None
    assert broker.unexpected_exit() is None
    stderr = broker.stderr_text()
    # Logged once, with the plugin's traceback, however often it failed.
    assert stderr.count("authorize raised RuntimeError: policy database unreachable") == 1, stderr
    assert stderr.count("Traceback") == 1


def test_a_plugin_that_cannot_be_imported_stops_start_up_with_exit_2(tmp_path: Path) -> None:
    result = run_broker_cli(
        [
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            "--override",
            "authorizer.class.name=no_such_module:Nope",
        ],
        tmp_path,
    )
    assert_config_error_naming(result, "authorizer.class.name")
    assert "no_such_module:Nope" in result.stderr and "ModuleNotFoundError" in result.stderr


POLICY_PLUGIN = '''
import threading
import time
from pathlib import Path

from krust.plugins.authorizer import AuthorizationResult


class FilePolicy:
    """Denies the topics listed in a file; forgets the broker's cached decisions when the file
    changes (the plugin's own policy store)."""

    def configure(self, configs):
        self.path = Path(configs["policy.file"])

    def start(self, context):
        self.denied = self._read()
        threading.Thread(target=self._watch, args=(context,), daemon=True).start()

    def _read(self):
        return set(self.path.read_text().split())

    def _watch(self, context):
        while True:
            time.sleep(0.05)
            denied = self._read()
            if denied != self.denied:
                self.denied = denied
                context.invalidate()

    def close(self):
        pass

    def authorize(self, context, actions):
        return [
            AuthorizationResult.DENIED
            if a.resource.name in self.denied
            else AuthorizationResult.ALLOWED
            for a in actions
        ]
'''


def test_a_plugin_that_invalidates_has_its_new_policy_applied(
    broker_factory, tmp_path: Path
) -> None:
    (tmp_path / "file_policy.py").write_text(textwrap.dedent(POLICY_PLUGIN))
    policy = tmp_path / "denied-topics"
    policy.write_text("")
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    broker: BrokerProcess = broker_factory(
        {"authorizer.class.name": "file_policy:FilePolicy", "policy.file": str(policy)},
        env={"PYTHONPATH": pythonpath},
    )
    create_topic(broker.bootstrap, "changing")
    assert produce_error(broker.bootstrap, "changing") is None  # now cached as allowed
    policy.write_text("changing\n")
    deadline = time.monotonic() + TIMEOUT_S
    error = None
    while error is None and time.monotonic() < deadline:
        error = produce_error(broker.bootstrap, "changing")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_admin_apis_answer_kafkas_authorization_errors(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(OPEN_UNTIL_ACLS)
    create_topic(broker.bootstrap, "guarded")
    admin = admin_client(broker.bootstrap)
    denied = (AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS)
    for future in admin.create_acls(
        describable_but(ResourceType.TOPIC, "guarded", *denied)
    ).values():
        future.result(TIMEOUT_S)

    def error_of(future: Any) -> int:
        with pytest.raises(KafkaException) as raised:
            future.result(TIMEOUT_S)
        return int(raised.value.args[0].code())

    assert (
        error_of(admin.delete_topics(["guarded"])["guarded"])
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    grow = admin.create_partitions([NewPartitions("guarded", 2)])["guarded"]
    assert error_of(grow) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, "guarded")
    assert error_of(admin.describe_configs([resource])[resource]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )

    # Once the cluster has an ACL, managing ACLs needs ALTER on it.
    deny_alter = acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    admin.create_acls([deny_alter])[deny_alter].result(TIMEOUT_S)
    again = acl(ResourceType.TOPIC, "other", AclOperation.READ)
    assert error_of(admin.create_acls([again])[again]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_committing_offsets_of_a_topic_one_may_not_read_is_refused(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(OPEN_UNTIL_ACLS)
    for topic in ("ledger", "open-ledger"):
        create_topic(broker.bootstrap, topic)
    admin = admin_client(broker.bootstrap)
    for future in admin.create_acls(
        describable_but(ResourceType.TOPIC, "ledger", AclOperation.READ)
    ).values():
        future.result(TIMEOUT_S)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "auditors"})
    offsets = [TopicPartition("ledger", 0, 5), TopicPartition("open-ledger", 0, 7)]
    with pytest.raises(KafkaException) as refused:
        consumer.commit(offsets=offsets, asynchronous=False)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    fetched = consumer.committed([TopicPartition("open-ledger", 0)], timeout=TIMEOUT_S)
    assert [tp.offset for tp in fetched] == [7]
    consumer.close()
