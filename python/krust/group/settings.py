"""The broker settings the group coordinator reads, by their Kafka names, with Kafka's defaults."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from krust.coordinator.settings import int_settings

# Kafka's classic coordinator times out a new member's parked JoinGroup after 5 minutes: such a
# member has no member id to heartbeat with, so this is the only way a vanished one goes away.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class ConsumerGroupMigrationPolicy(enum.Enum):
    """Kafka's group.consumer.migration.policy: whether a non-empty classic group may become a
    consumer group (upgrade) when a member joins with the consumer protocol, and back (downgrade)
    when the last member using it leaves."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
            ConsumerGroupMigrationPolicy.UPGRADE,
        )

    @property
    def downgrade_enabled(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
            ConsumerGroupMigrationPolicy.DOWNGRADE,
        )


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_load_buffer_size: int = 5 * 1024 * 1024
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    # KIP-848 consumer groups.
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: ConsumerGroupMigrationPolicy = (
        ConsumerGroupMigrationPolicy.BIDIRECTIONAL
    )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Read the Kafka-named keys present in `config`; absent keys keep Kafka's defaults."""
        values: dict[str, Any] = int_settings(cls, config)
        if "group.consumer.assignors" in config:
            values["group_consumer_assignors"] = _names(config["group.consumer.assignors"])
        if "group.consumer.migration.policy" in config:
            values["group_consumer_migration_policy"] = ConsumerGroupMigrationPolicy(
                str(config["group.consumer.migration.policy"]).lower()
            )
        if "offsets.retention.minutes" in config:
            values["offsets_retention_ms"] = int(config["offsets.retention.minutes"]) * 60_000
        return cls(**values)


def _names(value: object) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    return tuple(str(item).strip() for item in items if str(item).strip())
