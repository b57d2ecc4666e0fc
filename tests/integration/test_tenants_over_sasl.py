"""Authentication, authorization and quotas together, as a multi-tenant deployment uses them:
users authenticate with SASL/PLAIN, ACLs on prefixed topics and groups name those users, and
what one user may do another may not, through real clients."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from .broker_process import HOST, BrokerProcess, free_port

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    f'user_{user}="{password}"' for user, password in PASSWORDS.items()
)
TIMEOUT_S = 15.0


def client(sasl_port: int, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"{HOST}:{sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **extra,
    }


def produce(config: dict[str, Any], topic: str, value: bytes) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, value, on_delivery=lambda error, _: outcome.append(error))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def tenant_acls(user: str) -> list[AclBinding]:
    """What a tenant may do: its own prefixed topics (write, read) and groups (read)."""
    principal, prefixed = f"User:{user}", ResourcePatternType.PREFIXED
    allow = AclPermissionType.ALLOW
    return [
        AclBinding(ResourceType.TOPIC, f"{user}-", prefixed, principal, "*", op, allow)
        for op in (AclOperation.WRITE, AclOperation.READ)
    ] + [
        AclBinding(
            ResourceType.GROUP, f"{user}-", prefixed, principal, "*", AclOperation.READ, allow
        )
    ]


def test_each_sasl_user_reaches_only_what_its_acls_allow(tmp_path) -> None:
    sasl_port = free_port()
    broker = BrokerProcess(
        tmp_path,
        {
            "authorizer.class.name": STANDARD,
            "super.users": "User:admin",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS + ";",
            # alice's group forms at once: no initial rebalance delay.
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    broker.overrides["listeners"] = (
        f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:{sasl_port}"
    )
    broker.start()
    try:
        admin = AdminClient(client(sasl_port, "admin"))
        futures = admin.create_topics([NewTopic(t, 1) for t in ("alice-orders", "bob-orders")])
        for future in futures.values():
            future.result(TIMEOUT_S)
        for future in admin.create_acls(tenant_acls("alice") + tenant_acls("bob")).values():
            future.result(TIMEOUT_S)

        alice, bob = client(sasl_port, "alice"), client(sasl_port, "bob")
        assert produce(alice, "alice-orders", b"from alice") is None
        denied = produce(bob, "alice-orders", b"from bob")
        assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        denied = produce(alice, "bob-orders", b"from alice")
        assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        consumer = Consumer({**alice, "group.id": "alice-readers", "auto.offset.reset": "earliest"})
        consumer.subscribe(["alice-orders"])
        values = []
        for _ in range(int(TIMEOUT_S / 0.5)):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
                break
        consumer.close()
        assert values == [b"from alice"]

        # A group outside the tenant's prefix is refused, though the topic is its own.
        consumer = Consumer({**alice, "group.id": "shared-readers"})
        consumer.subscribe(["alice-orders"])
        error = None
        for _ in range(int(TIMEOUT_S / 0.5)):
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                error = message.error()
                break
        consumer.close()
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

        # The PLAINTEXT listener's clients are User:ANONYMOUS, whom no ACL allows anything.
        denied = produce({"bootstrap.servers": broker.bootstrap}, "alice-orders", b"anonymous")
        assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        crash = broker.unexpected_exit()
        broker.stop()
        assert crash is None, crash
