//! The broker settings the core needs, already validated by the Python config layer.

use std::collections::HashMap;
use std::path::PathBuf;

use krust_storage::{CleanerConfig, LogConfig};

use crate::metadata::metadata_log::MetadataLogSettings;
use crate::quota::QuotaWindow;
use crate::security::session::SecurityProtocol;
use crate::security::ListenerSecurity;

/// One listener: a name (e.g. PLAINTEXT), the address to bind and its security protocol.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// From listener.security.protocol.map.
    pub security_protocol: SecurityProtocol,
    /// TLS and SASL of an SSL, SASL_PLAINTEXT or SASL_SSL listener (docs/security.md).
    pub security: ListenerSecurity,
}

/// Everything the Rust core reads from the broker configuration (Kafka names in comments).
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    /// node.id
    pub node_id: i32,
    /// listeners
    pub listeners: Vec<Listener>,
    /// advertised.listeners (defaults to listeners)
    pub advertised_listeners: Vec<Listener>,
    /// log.dirs
    pub log_dirs: Vec<PathBuf>,
    /// num.partitions
    pub num_partitions: i32,
    /// default.replication.factor
    pub default_replication_factor: i16,
    /// auto.create.topics.enable
    pub auto_create_topics_enable: bool,
    /// socket.request.max.bytes
    pub socket_request_max_bytes: usize,
    /// queued.max.requests
    pub queued_max_requests: usize,
    /// max.connections.per.ip
    pub max_connections_per_ip: usize,
    /// max.connections
    pub max_connections: usize,
    /// quota.window.num and quota.window.size.seconds
    pub quota_window: QuotaWindow,
    /// connections.max.idle.ms
    pub connections_max_idle_ms: u64,
    /// socket.send.buffer.bytes (-1: the OS default)
    pub socket_send_buffer_bytes: i32,
    /// socket.receive.buffer.bytes (-1: the OS default)
    pub socket_receive_buffer_bytes: i32,
    /// log.flush.scheduler.interval.ms
    pub log_flush_scheduler_interval_ms: u64,
    /// log.retention.check.interval.ms
    pub log_retention_check_interval_ms: u64,
    /// replica.high.watermark.checkpoint.interval.ms
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    /// krust.metrics.port: the Prometheus endpoint's port on the first listener's host
    /// (None: no endpoint).
    pub metrics_port: Option<u16>,
    /// The broker-wide defaults of every topic-level log setting (message.max.bytes, log.segment.bytes, ...).
    pub log_defaults: LogConfig,
    /// log.cleaner.enable, log.cleaner.threads, log.cleaner.dedupe.buffer.size, ...
    pub cleaner: CleanerConfig,
    /// metadata.log.segment.*, metadata.max.retention.*
    pub metadata_log: MetadataLogSettings,
    /// controller.quorum.voters, process.roles, controller.listener.names
    pub quorum: QuorumSettings,
    /// replica.*, num.replica.fetchers, inter.broker.listener.name
    pub replication: ReplicationSettings,
}

/// How followers fetch from their leaders and when a leader drops a lagging follower from
/// the ISR (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationSettings {
    /// replica.lag.time.max.ms
    pub replica_lag_time_max_ms: i64,
    /// replica.fetch.max.bytes: per partition of a fetch.
    pub replica_fetch_max_bytes: i32,
    /// replica.fetch.response.max.bytes: per fetch.
    pub replica_fetch_response_max_bytes: i32,
    /// replica.fetch.wait.max.ms
    pub replica_fetch_wait_max_ms: i32,
    /// replica.fetch.min.bytes
    pub replica_fetch_min_bytes: i32,
    /// replica.fetch.backoff.ms: after a failed fetch of a partition.
    pub replica_fetch_backoff_ms: u64,
    /// replica.socket.timeout.ms
    pub replica_socket_timeout_ms: u64,
    /// num.replica.fetchers: fetcher threads per leader broker.
    pub num_replica_fetchers: usize,
    /// inter.broker.listener.name (None: the first listener).
    pub inter_broker_listener_name: Option<String>,
}

impl Default for ReplicationSettings {
    fn default() -> Self {
        ReplicationSettings {
            replica_lag_time_max_ms: 30_000,
            replica_fetch_max_bytes: 1_048_576,
            replica_fetch_response_max_bytes: 10_485_760,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_min_bytes: 1,
            replica_fetch_backoff_ms: 1_000,
            replica_socket_timeout_ms: 30_000,
            num_replica_fetchers: 1,
            inter_broker_listener_name: None,
        }
    }
}

impl BrokerSettings {
    /// Whether this node belongs to a controller quorum of several voters, whose active
    /// controller it reaches over the network.
    pub fn clustered(&self) -> bool {
        !self.quorum.voters.is_empty()
    }

    /// The listener brokers reach each other on: `inter.broker.listener.name`, else the
    /// first listener.
    pub fn inter_broker_listener_name(&self) -> String {
        self.replication
            .inter_broker_listener_name
            .clone()
            .or_else(|| self.listeners.first().map(|l| l.name.clone()))
            .unwrap_or_default()
    }
}

/// The controller quorum as the config names it (docs/quorum.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSettings {
    /// controller.quorum.voters as (node id, host, port); empty: this node alone, on its
    /// first listener.
    pub voters: Vec<(i32, String, u16)>,
    /// process.roles contains `controller`.
    pub is_voter: bool,
    /// controller.listener.names: the listeners that serve the quorum's RPCs.
    pub controller_listener_names: Vec<String>,
    /// controller.quorum.election.timeout.ms (each election waits 1 to 2 times it).
    pub election_timeout_ms: u64,
}

impl Default for QuorumSettings {
    fn default() -> Self {
        QuorumSettings {
            voters: Vec::new(),
            is_voter: true,
            controller_listener_names: Vec::new(),
            election_timeout_ms: krust_raft::quorum::ELECTION_TIMEOUT_MS,
        }
    }
}

impl Default for BrokerSettings {
    fn default() -> Self {
        let plaintext = Listener {
            name: "PLAINTEXT".into(),
            host: "localhost".into(),
            port: 9092,
            security_protocol: SecurityProtocol::Plaintext,
            security: ListenerSecurity::default(),
        };
        BrokerSettings {
            node_id: 1,
            listeners: vec![plaintext.clone()],
            advertised_listeners: vec![plaintext],
            log_dirs: vec![PathBuf::from("krust-data")],
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            socket_request_max_bytes: 104_857_600,
            queued_max_requests: 500,
            max_connections_per_ip: i32::MAX as usize,
            max_connections: i32::MAX as usize,
            connections_max_idle_ms: 600_000,
            quota_window: QuotaWindow::default(),
            socket_send_buffer_bytes: 102_400,
            socket_receive_buffer_bytes: 102_400,
            log_flush_scheduler_interval_ms: u64::MAX,
            log_retention_check_interval_ms: 300_000,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
            metrics_port: None,
            log_defaults: LogConfig::default(),
            cleaner: CleanerConfig::default(),
            metadata_log: MetadataLogSettings::default(),
            replication: ReplicationSettings::default(),
            quorum: QuorumSettings::default(),
        }
    }
}

/// Applies topic-level overrides (Kafka topic config names) on top of the broker defaults,
/// each parsed and bounded by the config table. The controller checked them against the same
/// table before writing them; one that still fails (written by an older krust) is logged and
/// keeps the broker default, so a bad record cannot stop the broker from starting.
pub fn topic_log_config(defaults: &LogConfig, overrides: &HashMap<String, String>) -> LogConfig {
    let mut config = defaults.clone();
    // Kafka's test-only internal.segment.bytes wins over segment.bytes: apply it last.
    let mut names: Vec<&String> = overrides.keys().collect();
    names.sort_by_key(|name| (name.starts_with("internal."), *name));
    for name in names {
        if let Err(error) = config.apply_override(name, &overrides[name]) {
            tracing::warn!(%error, "ignoring a topic config; the broker default applies");
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn an_override_the_table_refuses_keeps_the_default() {
        let defaults = LogConfig::default();
        let config = topic_log_config(
            &defaults,
            &overrides(&[("segment.index.bytes", "8"), ("segment.ms", "60000")]),
        );
        assert_eq!(config.segment_index_bytes, defaults.segment_index_bytes);
        assert_eq!(config.segment_ms, 60_000);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn the_internal_segment_size_wins() {
        let config = topic_log_config(
            &LogConfig::default(),
            &overrides(&[
                ("segment.bytes", "2097152"),
                ("internal.segment.bytes", "1000"),
            ]),
        );
        assert_eq!(config.segment_bytes, 1000);
    }
}
