"""The broker settings the transaction coordinator reads, by their Kafka names, with Kafka's
defaults (TransactionLogConfig, TransactionStateManagerConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from krust.coordinator.settings import int_settings

# Kafka's transaction.state.log.load.buffer.size default; not a setting krust accepts.
LOAD_BUFFER_BYTES = 5 * 1024 * 1024
# How long a marker waits before it is sent again after a retriable failure (Kafka's
# inter-broker client backs off by retry.backoff.ms, 100 ms).
MARKER_RETRY_BACKOFF_MS = 100


@dataclass(frozen=True)
class TransactionCoordinatorConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_min_isr: int = 2
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # The group coordinator's setting: AddOffsetsToTxn may come before __consumer_offsets exists.
    offsets_topic_num_partitions: int = 50

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Read the Kafka-named keys present in `config`; absent keys keep Kafka's defaults."""
        values = int_settings(cls, config)
        return cls(**values)

    def topic_configs(self) -> dict[str, str]:
        """Kafka's enforced configs of `__transaction_state` (TransactionStateManager)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(self.transaction_state_log_min_isr),
            "segment.bytes": str(self.transaction_state_log_segment_bytes),
            "unclean.leader.election.enable": "false",
        }
