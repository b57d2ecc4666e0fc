"""The config APIs' logic: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against the
controller with an in-memory core (errors, sources, operations, dynamic broker configs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from krust.bridge.protocol import build_entity
from krust.config.broker import BrokerConfig
from krust.config.table import LONG_MAX
from krust.controller.config_resources import ConfigResourceLister
from krust.controller.configs import ConfigAdmin, OpType, ResourceType
from krust.controller.controller import Controller

from .conftest import FakeCore, LoopRunner
from .test_controller import context, create, make_config, topic

TOPIC, BROKER, BROKER_LOGGER, GROUP = (
    ResourceType.TOPIC,
    ResourceType.BROKER,
    ResourceType.BROKER_LOGGER,
    ResourceType.GROUP,
)
SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return make_config([tmp_path / "d1"], "log.roll.hours=2")


@pytest.fixture
def controller(config: BrokerConfig, fake_core: FakeCore) -> Controller:
    return Controller.open(config, fake_core)


@pytest.fixture
def admin(controller: Controller) -> ConfigAdmin:
    return ConfigAdmin(controller)


def describe(
    run: LoopRunner,
    admin: ConfigAdmin,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    version: int = 4,
) -> Any:
    request = build_entity(
        load_request_schema(32, version),
        {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
            ],
            "include_synonyms": True,
            "include_documentation": True,
        },
    )
    (result,) = run(admin.describe_configs(request, context(32, version))).results
    return result


def incremental(
    run: LoopRunner,
    admin: ConfigAdmin,
    resource_type: int,
    name: str,
    *ops: tuple[str, str | None, OpType],
    validate_only: bool = False,
) -> tuple[ErrorCode, str | None]:
    configs = [{"name": n, "value": v, "config_operation": op} for n, v, op in ops]
    request = build_entity(
        load_request_schema(44, 1),
        {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configs": configs}
            ],
            "validate_only": validate_only,
        },
    )
    (response,) = run(admin.incremental_alter_configs(request, context(44, 1))).responses
    return response.error_code, response.error_message


def alter(
    run: LoopRunner, admin: ConfigAdmin, resource_type: int, name: str, configs: dict[str, Any]
) -> tuple[ErrorCode, str | None]:
    request = build_entity(
        load_request_schema(33, 2),
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": n, "value": v} for n, v in configs.items()],
                }
            ],
            "validate_only": False,
        },
    )
    (response,) = run(admin.alter_configs(request, context(33, 2))).responses
    return response.error_code, response.error_message


def entries(result: Any) -> dict[str, Any]:
    return {config.name: config for config in result.configs}


def test_a_topic_is_described_with_kafkas_sources_types_synonyms_and_docs(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin
) -> None:
    create(run, controller, topic("t", configs=[{"name": "retention.ms", "value": "1000"}]))
    result = describe(run, admin, TOPIC, "t")
    configs = entries(result)
    assert result.error_code is ErrorCode.none
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("1000", 1, 5)
    assert retention.documentation and not retention.read_only and not retention.is_sensitive
    assert [(s.name, s.value, s.source) for s in configs["segment.ms"].synonyms] == [
        ("log.roll.hours", "2", 4),
        ("log.roll.hours", "168", 5),
    ]
    assert (configs["segment.ms"].value, configs["segment.ms"].config_source) == ("7200000", 4)
    assert configs["cleanup.policy"].config_type == 7
    only = describe(run, admin, TOPIC, "t", ["segment.ms"])
    assert [c.name for c in only.configs] == ["segment.ms"]


def test_describing_bad_resources_answers_as_kafka_does(
    run: LoopRunner, admin: ConfigAdmin
) -> None:
    missing = describe(run, admin, TOPIC, "absent")
    assert (missing.error_code, missing.configs) == (ErrorCode.unknown_topic_or_partition, ())
    assert describe(run, admin, TOPIC, "bad/name").error_code is ErrorCode.invalid_topic_exception
    other = describe(run, admin, BROKER, "2")
    assert other.error_code is ErrorCode.invalid_request
    assert other.error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    assert describe(run, admin, BROKER, "x").error_code is ErrorCode.invalid_request
    logger = describe(run, admin, BROKER_LOGGER, "1")
    assert logger.error_code is ErrorCode.invalid_request
    assert logger.error_message == "Unsupported resource type: BROKER_LOGGER"


def test_a_broker_is_described_with_read_only_flags_and_kafkas_null_derived_keys(
    run: LoopRunner, admin: ConfigAdmin
) -> None:
    configs = entries(describe(run, admin, BROKER, "1"))
    hours = configs["log.roll.hours"]
    assert (hours.value, hours.config_source, hours.read_only) == ("2", 4, True)
    # Kafka reports log.roll.ms itself unset (its family's log.roll.hours is dropped).
    roll = configs["log.roll.ms"]
    assert (roll.value, roll.config_source, roll.synonyms, roll.read_only) == (None, 5, (), False)
    assert configs["node.id"].read_only
    assert configs["listeners"].value == "PLAINTEXT://127.0.0.1:19092"
    # The default resource lists only what was set cluster-wide.
    assert describe(run, admin, BROKER, "").configs == ()


def test_incremental_operations_append_and_subtract_list_items(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin
) -> None:
    create(run, controller, topic("t"))
    assert incremental(run, admin, TOPIC, "t", ("cleanup.policy", "compact", APPEND))[0] == 0
    assert controller.image.topics["t"].configs["cleanup.policy"] == "delete,compact"
    assert incremental(run, admin, TOPIC, "t", ("cleanup.policy", "delete", SUBTRACT))[0] == 0
    assert controller.image.topics["t"].configs["cleanup.policy"] == "compact"
    assert incremental(run, admin, TOPIC, "t", ("cleanup.policy", None, DELETE))[0] == 0
    assert "cleanup.policy" not in controller.image.topics["t"].configs
    error, message = incremental(run, admin, TOPIC, "t", ("segment.ms", "1", APPEND))
    assert (error, message) == (
        ErrorCode.invalid_config,
        "Can't APPEND to key segment.ms because its type is not LIST.",
    )


def test_malformed_changes_are_invalid_requests(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin
) -> None:
    create(run, controller, topic("t"))
    error, message = incremental(
        run, admin, TOPIC, "t", ("segment.ms", "1", SET), ("segment.ms", "2", SET)
    )
    assert (error, message) == (ErrorCode.invalid_request, "Error due to duplicate config keys")
    error, message = incremental(run, admin, TOPIC, "t", ("segment.ms", None, SET))
    assert (error, message) == (
        ErrorCode.invalid_request,
        "Null value not supported for : segment.ms",
    )
    error, message = incremental(run, admin, TOPIC, "t", ("segment.ms", "1", 7))  # type: ignore[arg-type]
    assert (error, message) == (ErrorCode.invalid_request, "Unknown operations type 7")
    error, _ = incremental(run, admin, TOPIC, "", ("segment.ms", "1", SET))
    assert error is ErrorCode.invalid_request
    error, message = incremental(run, admin, BROKER_LOGGER, "1", ("root", "DEBUG", SET))
    assert (error, message) == (ErrorCode.invalid_request, "Unknown resource type 8")


def test_validate_only_and_failed_resources_write_nothing(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin, fake_core: FakeCore
) -> None:
    create(run, controller, topic("t"))
    offset = controller.image.metadata_offset
    assert incremental(run, admin, TOPIC, "t", ("segment.ms", "1000", SET), validate_only=True)[
        0
    ] is (ErrorCode.none)
    error, message = incremental(run, admin, TOPIC, "t", ("segment.ms", "0", SET))
    assert error is ErrorCode.invalid_config and "segment.ms" in (message or "")
    error, message = incremental(run, admin, TOPIC, "gone", ("segment.ms", "1000", SET))
    assert (error, message) == (
        ErrorCode.unknown_topic_or_partition,
        "The topic 'gone' does not exist.",
    )
    assert controller.image.metadata_offset == offset


def test_legacy_alter_replaces_the_whole_set_of_overrides(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin
) -> None:
    create(run, controller, topic("t", configs=[{"name": "segment.ms", "value": "60000"}]))
    assert alter(run, admin, TOPIC, "t", {"flush.ms": "1000"}) == (ErrorCode.none, None)
    assert dict(controller.image.topics["t"].configs) == {"flush.ms": "1000"}
    error, message = alter(run, admin, TOPIC, "t", {"flush.ms": None})
    assert (error, message) == (
        ErrorCode.invalid_request,
        "Null value not supported for : flush.ms",
    )


def test_dynamic_broker_configs_reach_the_core_and_survive_a_restart(
    run: LoopRunner,
    controller: Controller,
    admin: ConfigAdmin,
    config: BrokerConfig,
    fake_core: FakeCore,
) -> None:
    create(run, controller, topic("t"))
    assert incremental(run, admin, BROKER, "", ("log.segment.bytes", "2097152", SET))[0] == 0
    assert fake_core.deltas[-1]["log_defaults"]["segment.bytes"] == "2097152"
    assert incremental(run, admin, BROKER, "1", ("log.segment.bytes", "3145728", SET))[0] == 0
    assert fake_core.deltas[-1]["log_defaults"]["segment.bytes"] == "3145728"
    # A topic-only change does not resend the broker defaults.
    assert incremental(run, admin, TOPIC, "t", ("segment.ms", "60000", SET))[0] == 0
    assert "log_defaults" not in fake_core.deltas[-1]
    segment = entries(describe(run, admin, TOPIC, "t"))["segment.bytes"]
    assert (segment.value, segment.config_source) == ("3145728", 2)
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "3145728", 2),
        ("log.segment.bytes", "2097152", 3),
        ("log.segment.bytes", "1073741824", 5),
    ]
    assert [c.value for c in describe(run, admin, BROKER, "").configs] == ["2097152"]

    restarted = Controller.open(config, fake_core.reopen())
    assert restarted.image.broker_configs == {
        "": {"log.segment.bytes": "2097152"},
        "1": {"log.segment.bytes": "3145728"},
    }
    assert restarted.core_image()["log_defaults"]["segment.bytes"] == "3145728"
    assert incremental(
        run, ConfigAdmin(restarted), BROKER, "1", ("log.segment.bytes", None, DELETE)
    )[0] is (ErrorCode.none)
    assert restarted.broker_config()["log.segment.bytes"] == 2097152


@pytest.mark.parametrize(
    ("name", "key", "value", "error", "message"),
    [
        (
            "1",
            "num.partitions",
            "3",
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: Set(num.partitions)",
        ),
        (
            "",
            "listeners",
            "PLAINTEXT://:1",
            ErrorCode.invalid_request,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(listeners)",
        ),
        (
            "1",
            "log.segment.bytes",
            "10",
            ErrorCode.invalid_request,
            "Invalid value 10 for configuration log.segment.bytes: value must be at least 1048576",
        ),
        (
            "1",
            "num.replica.fetchers",
            "2",
            ErrorCode.invalid_config,
            "krust cannot apply a change of num.replica.fetchers while running: set it in the "
            "broker's config file and restart",
        ),
        (
            "",
            "log.cleaner.threads",
            "3",
            ErrorCode.invalid_request,
            "Invalid value 3 for log.cleaner.threads: Log cleaner threads cannot be increased to "
            "more than double the current value 1",
        ),
        (
            "",
            "log.cleaner.dedupe.buffer.size",
            "-1",
            ErrorCode.invalid_request,
            "Invalid value -1 for configuration log.cleaner.dedupe.buffer.size: value must be at "
            "least 0",
        ),
        (
            "1",
            "log.cleaner.threads",
            "0",
            ErrorCode.invalid_request,
            "Invalid value 0 for log.cleaner.threads: Log cleaner threads should be at least 1",
        ),
        (
            "1",
            "log.preallocate",
            "true",
            ErrorCode.invalid_config,
            "Invalid value true for configuration log.preallocate: krust accepts only the default "
            "(false): krust does not preallocate segment files",
        ),
        (
            "1",
            "no.such.key",
            "1",
            ErrorCode.invalid_config,
            "Unknown broker config name: no.such.key",
        ),
        (
            "2",
            "log.segment.bytes",
            "2097152",
            ErrorCode.invalid_request,
            "Unexpected broker id, expected 1, but received 2",
        ),
        (
            "x",
            "log.segment.bytes",
            "2097152",
            ErrorCode.invalid_request,
            "Node id must be an integer, but it is: x",
        ),
    ],
)
def test_broker_changes_krust_cannot_honour_are_refused_naming_the_key(
    run: LoopRunner,
    admin: ConfigAdmin,
    name: str,
    key: str,
    value: str,
    error: ErrorCode,
    message: str,
) -> None:
    assert incremental(run, admin, BROKER, name, (key, value, SET)) == (error, message)


def test_cleaner_keys_change_live_within_kafkas_thread_bounds(
    run: LoopRunner, admin: ConfigAdmin, controller: Controller, fake_core: FakeCore
) -> None:
    assert incremental(run, admin, BROKER, "", ("log.cleaner.threads", "2", SET))[0] == 0
    assert fake_core.cleaner is not None and fake_core.cleaner[0] == 2
    assert incremental(run, admin, BROKER, "1", ("log.cleaner.threads", "4", SET))[0] == 0
    assert incremental(run, admin, BROKER, "1", ("log.cleaner.backoff.ms", "100", SET))[0] == 0
    assert fake_core.cleaner[:3] == (4, 134217728, 100)
    # Bounded by the threads in force (4): down to 2, up to 8.
    refused = incremental(run, admin, BROKER, "1", ("log.cleaner.threads", "1", SET))
    assert refused == (
        ErrorCode.invalid_request,
        "Invalid value 1 for log.cleaner.threads: Log cleaner threads cannot be reduced to less "
        "than half the current value 4",
    )
    assert controller.broker_config()["log.cleaner.threads"] == 4
    assert fake_core.cleaner[0] == 4


def test_group_configs_are_described_checked_stored_and_survive_a_restart(
    run: LoopRunner,
    config: BrokerConfig,
    controller: Controller,
    admin: ConfigAdmin,
    fake_core: FakeCore,
) -> None:
    configs = entries(describe(run, admin, GROUP, "g"))
    timeout = configs["consumer.session.timeout.ms"]
    # The default is the broker's group.consumer.session.timeout.ms.
    assert (timeout.value, timeout.config_source, timeout.config_type) == ("45000", 5, 3)
    assert incremental(run, admin, GROUP, "g", ("consumer.session.timeout.ms", "50000", SET)) == (
        ErrorCode.none,
        None,
    )
    timeout = entries(describe(run, admin, GROUP, "g"))["consumer.session.timeout.ms"]
    assert (timeout.value, timeout.config_source) == ("50000", 8)  # GROUP_CONFIG
    assert controller.image.group_configs == {"g": {"consumer.session.timeout.ms": "50000"}}
    # Kafka's checks against the broker's bounds, with its messages.
    refusals = [
        (
            ("consumer.session.timeout.ms", "30000", SET),
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            ("consumer.heartbeat.interval.ms", "20000", SET),
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (("no.such.key", "1", SET), "Unknown group config name: no.such.key"),
    ]
    for operation, message in refusals:
        assert incremental(run, admin, GROUP, "g", operation) == (
            ErrorCode.invalid_config,
            message,
        )
    error, message = incremental(run, admin, GROUP, "g", ("share.session.timeout.ms", "50000", SET))
    assert error is ErrorCode.invalid_config
    assert message is not None and message.startswith(
        "krust does not honour group config share.session.timeout.ms"
    )
    assert describe(run, admin, GROUP, "").error_code is ErrorCode.invalid_request
    restarted = Controller.open(config, fake_core.reopen())
    assert restarted.image.group_configs == {"g": {"consumer.session.timeout.ms": "50000"}}


def test_password_keys_are_described_as_sensitive_without_their_value(
    run: LoopRunner, tmp_path: Path, fake_core: FakeCore
) -> None:
    config = make_config([tmp_path / "d1"], "ssl.keystore.key=SECRET KEY", "ssl.client.auth=none")
    admin = ConfigAdmin(Controller.open(config, fake_core))
    configs = entries(describe(run, admin, BROKER, "1"))
    key = configs["ssl.keystore.key"]
    assert (key.value, key.is_sensitive, key.synonyms, key.config_type) == (None, True, (), 9)
    assert (configs["ssl.client.auth"].value, configs["ssl.client.auth"].is_sensitive) == (
        "none",
        False,
    )


# Replication throttles (KIP-73): broker rates per broker over the cluster default over
# Long.MAX_VALUE, and the topics' throttled-replica lists as Kafka validates them.
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LIST_FORMAT = (
    "must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


def test_throttled_rates_reach_the_core_per_broker_over_the_cluster_default(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin, fake_core: FakeCore
) -> None:
    assert fake_core.replication_throttled_rates == (LONG_MAX, LONG_MAX)
    assert incremental(run, admin, BROKER, "", (LEADER_RATE, "5000", SET))[0] == 0
    assert fake_core.replication_throttled_rates == (5000, LONG_MAX)
    changed = incremental(
        run, admin, BROKER, "1", (LEADER_RATE, "7", SET), (FOLLOWER_RATE, "9", SET)
    )
    assert changed[0] == 0
    assert fake_core.replication_throttled_rates == (7, 9)
    deleted = incremental(
        run, admin, BROKER, "1", (LEADER_RATE, None, DELETE), (FOLLOWER_RATE, None, DELETE)
    )
    assert deleted[0] == 0
    assert fake_core.replication_throttled_rates == (5000, LONG_MAX)
    assert incremental(run, admin, BROKER, "1", (FOLLOWER_RATE, "-1", SET)) == (
        ErrorCode.invalid_request,
        f"Invalid value -1 for configuration {FOLLOWER_RATE}: value must be at least 0",
    )


ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


def test_the_log_dir_move_throttle_reaches_the_core_live_and_goes_back_when_deleted(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin, fake_core: FakeCore
) -> None:
    # kafka-reassign-partitions --replica-alter-log-dirs-throttle sets it per broker, and its
    # --verify deletes it once the moves are done.
    assert fake_core.alter_log_dirs_throttled_rate == LONG_MAX
    assert incremental(run, admin, BROKER, "1", (ALTER_LOG_DIRS_RATE, "100000", SET))[0] == 0
    assert fake_core.alter_log_dirs_throttled_rate == 100_000
    assert incremental(run, admin, BROKER, "1", (ALTER_LOG_DIRS_RATE, None, DELETE))[0] == 0
    assert fake_core.alter_log_dirs_throttled_rate == LONG_MAX


@pytest.mark.parametrize("value", ["*", " * ", "0:1", "0:1,1:2", "0:1 , 1:2", "0:1,,1:2", ""])
def test_throttled_replica_lists_kafka_accepts_are_accepted(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin, value: str
) -> None:
    create(run, controller, topic("t"))
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        assert incremental(run, admin, TOPIC, "t", (key, value, SET)) == (ErrorCode.none, None)


@pytest.mark.parametrize("value", ["0", "a:1", "0:1,*", "0-1", "0:1:2"])
def test_malformed_throttled_replica_lists_are_refused_as_kafka_words_it(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin, value: str
) -> None:
    create(run, controller, topic("t"))
    key = "leader.replication.throttled.replicas"
    error, message = incremental(run, admin, TOPIC, "t", (key, value, SET))
    assert error == ErrorCode.invalid_config
    assert message is not None and key in message and LIST_FORMAT in message


def test_client_metrics_subscriptions_are_described_altered_listed_and_deleted(
    run: LoopRunner, controller: Controller, admin: ConfigAdmin
) -> None:
    metrics = ResourceType.CLIENT_METRICS
    configs = entries(describe(run, admin, metrics, "sub"))
    # A subscription that does not exist describes as Kafka's defaults.
    assert {name: c.value for name, c in configs.items()} == {
        "metrics": "",
        "interval.ms": "300000",
        "match": "",
    }
    assert configs["interval.ms"].config_source == 5  # DEFAULT_CONFIG
    done = incremental(
        run,
        admin,
        metrics,
        "sub",
        ("metrics", "org.apache.kafka.producer.", SET),
        ("interval.ms", "1000", SET),
        ("match", "client_id=app-.*", SET),
    )
    assert done == (ErrorCode.none, None)
    interval = entries(describe(run, admin, metrics, "sub"))["interval.ms"]
    assert (interval.value, interval.config_source) == ("1000", 7)  # CLIENT_METRICS_CONFIG
    assert (
        incremental(run, admin, metrics, "sub", ("metrics", "org.apache.kafka.consumer.", APPEND))[
            0
        ]
        is ErrorCode.none
    )
    assert controller.image.client_metrics["sub"]["metrics"] == (
        "org.apache.kafka.producer.,org.apache.kafka.consumer."
    )
    assert incremental(run, admin, metrics, "", ("interval.ms", "1000", SET)) == (
        ErrorCode.invalid_request,
        "Subscription name can't be empty",
    )
    assert incremental(run, admin, metrics, "sub", ("interval.ms", "10", SET))[0] is (
        ErrorCode.invalid_request
    )
    assert incremental(run, admin, metrics, "sub", ("match", "who=me", SET))[0] is (
        ErrorCode.invalid_config
    )

    lister = ConfigResourceLister(controller)

    def listed(version: int, types: list[int]) -> Any:
        request = build_entity(load_request_schema(74, version), {"resource_types": types})
        return run(lister.list_config_resources(request, context(74, version)))

    assert [(r.resource_name, r.resource_type) for r in listed(1, [16]).config_resources] == [
        ("sub", 16)
    ]
    assert [r.resource_name for r in listed(0, []).config_resources] == ["sub"]
    everything = {(r.resource_name, r.resource_type) for r in listed(1, []).config_resources}
    assert {("sub", 16), ("1", 4), ("1", 8)} <= everything
    assert listed(1, [3]).error_code is ErrorCode.unsupported_version  # ACL's GROUP, not config's

    deleted = incremental(
        run,
        admin,
        metrics,
        "sub",
        ("metrics", None, DELETE),
        ("interval.ms", None, DELETE),
        ("match", None, DELETE),
    )
    assert deleted == (ErrorCode.none, None)
    assert listed(1, [16]).config_resources == ()
