"""The broker settings the group coordinator reads, by their Kafka names, with Kafka's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from krust.coordinator.settings import int_settings

# Kafka's classic coordinator times out a new member's parked JoinGroup after 5 minutes: such a
# member has no member id to heartbeat with, so this is the only way a vanished one goes away.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Read the Kafka-named keys present in `config`; absent keys keep Kafka's defaults."""
        values = int_settings(cls, config)
        if "offsets.retention.minutes" in config:
            values["offsets_retention_ms"] = int(config["offsets.retention.minutes"]) * 60_000
        return cls(**values)
