"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs through confluent-kafka's AdminClient
and Kafka's own kafka-configs and kafka-topics, for topics, brokers and groups: values, sources,
synonyms, errors naming the key, changes applied live and surviving a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .clients.confluent import ADMIN_TIMEOUT_S, admin_client, create_topic
from .kafka_cli import CONFIG_COMMAND, TOPIC_COMMAND, run_tool

BROKER = "1"
# librdkafka cannot name the cluster-wide default broker resource (""): kafka-configs can.
BROKER_DEFAULT = ("--entity-type", "brokers", "--entity-default")


def describe(bootstrap: str, resource: ConfigResource) -> dict[str, ConfigEntry]:
    """The configs of `resource` (librdkafka always asks for synonyms)."""
    admin = admin_client(bootstrap)  # must outlive the future
    (future,) = admin.describe_configs([resource]).values()
    return future.result(timeout=ADMIN_TIMEOUT_S)


def incremental(
    bootstrap: str,
    resource_type: ResourceType,
    name: str,
    entries: list[tuple[str, str | None, AlterConfigOpType]],
    validate_only: bool = False,
) -> None:
    resource = ConfigResource(
        resource_type,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries
        ],
    )
    admin = admin_client(bootstrap)  # must outlive the futures
    futures = admin.incremental_alter_configs([resource], validate_only=validate_only)
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


def refusal(call: object) -> tuple[str, str]:
    """The Kafka error name and message an admin call failed with."""
    with pytest.raises(KafkaException) as failure:
        call()  # type: ignore[operator]
    error = failure.value.args[0]
    return error.name(), error.str()


def produce_one(bootstrap: str, topic: str, size: int) -> str | None:
    """Produce one uncompressed record of `size` bytes; its error name, or None when written."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "message.max.bytes": 10**7}
    )
    outcome: list[str | None] = []
    producer.produce(
        topic,
        value=b"x" * size,
        partition=0,
        on_delivery=lambda error, _: outcome.append(error and error.name()),
    )
    producer.flush(30)
    return outcome[0]


SET = AlterConfigOpType.SET
DELETE = AlterConfigOpType.DELETE
APPEND = AlterConfigOpType.APPEND
SUBTRACT = AlterConfigOpType.SUBTRACT


def test_topic_configs_are_described_with_values_sources_and_synonyms(
    broker_factory,
) -> None:
    broker = broker_factory({"log.roll.hours": "2"})
    create_topic(broker.bootstrap, "described", config={"retention.ms": "3600000"})
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.TOPIC, "described"))
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_read_only and not retention.is_sensitive
    segment_ms = configs["segment.ms"]
    assert (segment_ms.value, segment_ms.source) == (
        "7200000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    # librdkafka keys synonyms by name: the last of the two log.roll.hours entries is kept.
    assert list(segment_ms.synonyms) == ["log.roll.hours"]
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert "internal.segment.bytes" not in configs


def test_describing_a_missing_topic_is_unknown_topic(broker) -> None:
    name, _ = refusal(
        lambda: describe(broker.bootstrap, ConfigResource(ResourceType.TOPIC, "absent"))
    )
    assert name == "UNKNOWN_TOPIC_OR_PART"


def test_incremental_alter_sets_deletes_appends_and_subtracts_topic_configs(broker) -> None:
    create_topic(broker.bootstrap, "altered")
    resource = ConfigResource(ResourceType.TOPIC, "altered")
    incremental(
        broker.bootstrap,
        ResourceType.TOPIC,
        "altered",
        [("segment.ms", "60000", SET), ("cleanup.policy", "compact", APPEND)],
    )
    configs = describe(broker.bootstrap, resource)
    assert configs["segment.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete,compact"
    incremental(
        broker.bootstrap,
        ResourceType.TOPIC,
        "altered",
        [("segment.ms", None, DELETE), ("cleanup.policy", "delete", SUBTRACT)],
    )
    configs = describe(broker.bootstrap, resource)
    assert (configs["segment.ms"].value, configs["segment.ms"].source) == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert configs["cleanup.policy"].value == "compact"


def test_validate_only_changes_nothing_and_bad_values_name_the_key(broker) -> None:
    create_topic(broker.bootstrap, "checked")
    incremental(
        broker.bootstrap, ResourceType.TOPIC, "checked", [("segment.ms", "1000", SET)], True
    )
    resource = ConfigResource(ResourceType.TOPIC, "checked")
    assert describe(broker.bootstrap, resource)["segment.ms"].value == "604800000"
    # A bad value, an unknown key, APPEND to a non-list key, a refused key's other value.
    for key, value, op in [
        ("segment.bytes", "10", SET),
        ("retention.mss", "1", SET),
        ("segment.ms", "1", APPEND),
        ("preallocate", "true", SET),
    ]:
        name, message = refusal(
            lambda: incremental(
                broker.bootstrap,
                ResourceType.TOPIC,
                "checked",
                [(key, value, op)],  # noqa: B023
            )
        )
        assert name == "INVALID_CONFIG" and key in message, key
    name, _ = refusal(
        lambda: incremental(
            broker.bootstrap, ResourceType.TOPIC, "nowhere", [("segment.ms", "60000", SET)]
        )
    )
    assert name == "UNKNOWN_TOPIC_OR_PART"


def test_legacy_alter_configs_replaces_every_topic_override(broker) -> None:
    create_topic(broker.bootstrap, "replaced", config={"segment.ms": "60000"})
    resource = ConfigResource(ResourceType.TOPIC, "replaced", set_config={"flush.ms": "1000"})
    admin = admin_client(broker.bootstrap)
    (future,) = admin.alter_configs([resource]).values()
    future.result(timeout=ADMIN_TIMEOUT_S)
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.TOPIC, "replaced"))
    assert configs["flush.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_a_lowered_max_message_bytes_refuses_a_bigger_batch_live_and_after_restart(
    broker,
) -> None:
    create_topic(broker.bootstrap, "limited")
    assert produce_one(broker.bootstrap, "limited", 20_000) is None
    incremental(
        broker.bootstrap, ResourceType.TOPIC, "limited", [("max.message.bytes", "10000", SET)]
    )
    assert produce_one(broker.bootstrap, "limited", 20_000) == "MSG_SIZE_TOO_LARGE"
    assert produce_one(broker.bootstrap, "limited", 1_000) is None
    broker.stop()
    broker.restart()
    assert produce_one(broker.bootstrap, "limited", 20_000) == "MSG_SIZE_TOO_LARGE"
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.TOPIC, "limited"))
    assert configs["max.message.bytes"].value == "10000"


def test_a_dynamic_broker_default_changes_every_topic_without_an_override_live(broker) -> None:
    create_topic(broker.bootstrap, "follows")
    create_topic(broker.bootstrap, "pinned", config={"max.message.bytes": "100000"})
    kafka_configs(
        broker.bootstrap,
        *BROKER_DEFAULT,
        "--alter",
        "--add-config",
        "message.max.bytes=10000",
    )
    assert produce_one(broker.bootstrap, "follows", 20_000) == "MSG_SIZE_TOO_LARGE"
    assert produce_one(broker.bootstrap, "pinned", 20_000) is None
    topic = describe(broker.bootstrap, ConfigResource(ResourceType.TOPIC, "follows"))
    entry = topic["max.message.bytes"]
    assert (entry.value, entry.source) == (
        "10000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )

    # Per broker wins over the cluster-wide default, and both survive a restart.
    incremental(
        broker.bootstrap, ResourceType.BROKER, BROKER, [("message.max.bytes", "30000", SET)]
    )
    assert produce_one(broker.bootstrap, "follows", 20_000) is None
    broker.stop()
    broker.restart()
    assert produce_one(broker.bootstrap, "follows", 40_000) == "MSG_SIZE_TOO_LARGE"
    assert produce_one(broker.bootstrap, "follows", 20_000) is None
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.BROKER, BROKER))
    entry = configs["message.max.bytes"]
    assert (entry.value, entry.source) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    described = kafka_configs(
        broker.bootstrap, "--entity-type", "brokers", "--entity-name", BROKER, "--describe", "--all"
    )
    assert (
        "message.max.bytes=30000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:message.max.bytes=30000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=10000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}"
    ) in described
    cluster = kafka_configs(broker.bootstrap, *BROKER_DEFAULT, "--describe")
    assert "message.max.bytes=10000 sensitive=false" in cluster
    assert "num.partitions" not in cluster


def test_broker_configs_are_described_and_refused_as_kafka_does(broker_factory) -> None:
    broker = broker_factory({"num.partitions": "3"})
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.BROKER, BROKER))
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.source) == ("3", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert partitions.is_read_only
    assert configs["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["log.segment.bytes"].is_read_only
    assert configs["log.roll.ms"].value is None

    def alter(key: str, value: str):
        return lambda: incremental(
            broker.bootstrap, ResourceType.BROKER, BROKER, [(key, value, SET)]
        )

    error, message = refusal(alter("num.partitions", "5"))
    assert error == "INVALID_REQUEST" and "num.partitions" in message
    error, message = refusal(alter("log.segment.bytes", "10"))
    assert error == "INVALID_REQUEST" and "log.segment.bytes" in message
    error, message = refusal(alter("num.replica.fetchers", "2"))
    assert error == "INVALID_CONFIG" and "num.replica.fetchers" in message
    error, message = refusal(alter("log.cleaner.threads", "3"))
    assert error == "INVALID_REQUEST" and "more than double the current value 1" in message
    error, message = refusal(alter("no.such.key", "1"))
    assert error == "INVALID_CONFIG" and "no.such.key" in message


def test_group_configs_are_described_set_and_checked(broker) -> None:
    configs = describe(broker.bootstrap, ConfigResource(ResourceType.GROUP, "g"))
    entry = configs["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)
    incremental(
        broker.bootstrap, ResourceType.GROUP, "g", [("consumer.session.timeout.ms", "50000", SET)]
    )
    entry = describe(broker.bootstrap, ConfigResource(ResourceType.GROUP, "g"))[
        "consumer.session.timeout.ms"
    ]
    assert (entry.value, entry.source) == ("50000", ConfigSource.GROUP_CONFIG.value)
    # Outside the broker's group.consumer.min/max.session.timeout.ms, and a group type krust
    # does not serve.
    for name, value in (
        ("consumer.session.timeout.ms", "70000"),
        ("share.session.timeout.ms", "50000"),
    ):
        error, message = refusal(
            lambda name=name, value=value: incremental(
                broker.bootstrap, ResourceType.GROUP, "g", [(name, value, SET)]
            )
        )
        assert error == "INVALID_CONFIG" and name in message


def kafka_configs(bootstrap: str, *args: str) -> str:
    done = run_tool(CONFIG_COMMAND, bootstrap, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_configs_alters_and_describes_topics_brokers_defaults_and_groups(broker) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "tooled")
    topic = ("--entity-type", "topics", "--entity-name", "tooled")
    kafka_configs(bootstrap, *topic, "--alter", "--add-config", "segment.ms=60000,flush.ms=1000")
    described = kafka_configs(bootstrap, *topic, "--describe")
    assert "segment.ms=60000" in described and "flush.ms=1000" in described
    kafka_configs(bootstrap, *topic, "--alter", "--delete-config", "flush.ms")
    assert "flush.ms" not in kafka_configs(bootstrap, *topic, "--describe")

    broker_default = BROKER_DEFAULT
    kafka_configs(bootstrap, *broker_default, "--alter", "--add-config", "log.roll.ms=3600000")
    assert "log.roll.ms=3600000" in kafka_configs(bootstrap, *broker_default, "--describe")
    one = ("--entity-type", "brokers", "--entity-name", BROKER)
    kafka_configs(bootstrap, *one, "--alter", "--add-config", "log.roll.ms=7200000")
    everything = kafka_configs(bootstrap, *one, "--describe", "--all")
    assert "log.roll.ms=7200000" in everything
    assert "DYNAMIC_BROKER_CONFIG:log.roll.ms=7200000" in everything

    refused = run_tool(
        CONFIG_COMMAND,
        bootstrap,
        *one,
        "--alter",
        "--add-config",
        "num.partitions=4",
    )
    assert refused.returncode != 0 and "num.partitions" in refused.stdout + refused.stderr

    group = ("--entity-type", "groups", "--entity-name", "tooled-group")
    assert "consumer.session.timeout.ms=45000" in kafka_configs(
        bootstrap, *group, "--describe", "--all"
    )
    kafka_configs(bootstrap, *group, "--alter", "--add-config", "consumer.session.timeout.ms=50000")
    assert "consumer.session.timeout.ms=50000" in kafka_configs(bootstrap, *group, "--describe")
    refused = run_tool(
        CONFIG_COMMAND,
        bootstrap,
        *group,
        "--alter",
        "--add-config",
        "share.session.timeout.ms=50000",
    )
    assert refused.returncode != 0
    assert "share.session.timeout.ms" in refused.stdout + refused.stderr


def test_kafka_topics_describe_prints_the_topics_configs(broker) -> None:
    create_topic(broker.bootstrap, "shown", config={"segment.ms": "60000"})
    done = run_tool(TOPIC_COMMAND, broker.bootstrap, "--describe", "--topic", "shown")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Topic: shown" in done.stdout
    assert "Configs: segment.ms=60000" in done.stdout
