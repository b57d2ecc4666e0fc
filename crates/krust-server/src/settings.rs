//! The broker settings the core needs, already validated by the Python config layer.

use std::collections::HashMap;
use std::path::PathBuf;

use krust_config::config_settings;
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

impl Listener {
    /// A PLAINTEXT listener named `name` on `host:port`.
    pub fn plaintext(name: &str, host: &str, port: u16) -> Listener {
        Listener {
            name: name.into(),
            host: host.into(),
            port,
            security_protocol: SecurityProtocol::Plaintext,
            security: ListenerSecurity::default(),
        }
    }
}

config_settings! {
    /// Everything the Rust core reads from the broker configuration: each field names its key
    /// in the config table, which gives its type, bounds and default.
    #[derive(Debug, Clone)]
    pub struct BrokerSettings {
        pub node_id: i32 = "node.id",
        /// Parsed by the Python config layer (`krust.config.listeners`).
        pub listeners: Vec<Listener> = given,
        /// The listeners, resolved by the Python config layer.
        pub advertised_listeners: Vec<Listener> = given,
        /// Resolved by the Python config layer (absolute paths, `log.dir` when unset).
        pub log_dirs: Vec<PathBuf> = "log.dirs",
        pub num_partitions: i32 = "num.partitions",
        pub default_replication_factor: i16 = "default.replication.factor",
        pub auto_create_topics_enable: bool = "auto.create.topics.enable",
        pub socket_request_max_bytes: usize = "socket.request.max.bytes",
        pub queued_max_requests: usize = "queued.max.requests",
        pub max_connections_per_ip: usize = "max.connections.per.ip",
        pub max_connections: usize = "max.connections",
        pub quota_window: QuotaWindow = nested,
        pub connections_max_idle_ms: u64 = "connections.max.idle.ms",
        /// -1: the OS default.
        pub socket_send_buffer_bytes: i32 = "socket.send.buffer.bytes",
        /// -1: the OS default.
        pub socket_receive_buffer_bytes: i32 = "socket.receive.buffer.bytes",
        pub log_flush_scheduler_interval_ms: u64 = "log.flush.scheduler.interval.ms",
        pub log_retention_check_interval_ms: u64 = "log.retention.check.interval.ms",
        pub replica_high_watermark_checkpoint_interval_ms: u64 =
            "replica.high.watermark.checkpoint.interval.ms",
        /// The Prometheus endpoint's port on the first listener's host (None: no endpoint).
        pub metrics_port: Option<u16> = "krust.metrics.port",
        /// The broker-wide defaults of every topic-level log setting (message.max.bytes,
        /// log.segment.bytes, ...).
        pub log_defaults: LogConfig = nested,
        /// log.cleaner.enable, log.cleaner.threads, log.cleaner.dedupe.buffer.size, ...
        pub cleaner: CleanerConfig = nested,
        /// metadata.log.segment.*, metadata.max.retention.*
        pub metadata_log: MetadataLogSettings = nested,
        /// controller.quorum.voters, process.roles, controller.listener.names
        pub quorum: QuorumSettings = nested,
        /// replica.*, num.replica.fetchers, inter.broker.listener.name
        pub replication: ReplicationSettings = nested,
    }
}

config_settings! {
    /// How followers fetch from their leaders and when a leader drops a lagging follower from
    /// the ISR.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ReplicationSettings {
        pub replica_lag_time_max_ms: i64 = "replica.lag.time.max.ms",
        /// Per partition of a fetch.
        pub replica_fetch_max_bytes: i32 = "replica.fetch.max.bytes",
        /// Per fetch.
        pub replica_fetch_response_max_bytes: i32 = "replica.fetch.response.max.bytes",
        pub replica_fetch_wait_max_ms: i32 = "replica.fetch.wait.max.ms",
        pub replica_fetch_min_bytes: i32 = "replica.fetch.min.bytes",
        /// After a failed fetch of a partition.
        pub replica_fetch_backoff_ms: u64 = "replica.fetch.backoff.ms",
        /// Fetcher threads per leader broker.
        pub num_replica_fetchers: usize = "num.replica.fetchers",
        /// None: the first listener.
        pub inter_broker_listener_name: Option<String> = "inter.broker.listener.name",
        /// What moving replicas between this broker's log dirs may copy per second.
        pub replica_alter_log_dirs_io_max_bytes_per_second: i64 =
            "replica.alter.log.dirs.io.max.bytes.per.second",
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

config_settings! {
    /// The controller quorum as the config names it (docs/quorum.md).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QuorumSettings {
        /// controller.quorum.voters as (node id, host, port), parsed by the Python config
        /// layer; empty: this node alone, on its first listener.
        pub voters: Vec<(i32, String, u16)> = given,
        pub process_roles: Vec<String> = "process.roles",
        /// The listeners that serve the quorum's RPCs.
        pub controller_listener_names: Vec<String> = "controller.listener.names",
    }
}

impl QuorumSettings {
    /// process.roles has `controller`.
    pub fn is_voter(&self) -> bool {
        self.process_roles.iter().any(|role| role == "controller")
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
    fn every_settings_struct_reads_the_tables_defaults_and_the_given_values() {
        let defaults = BrokerSettings::default();
        assert_eq!(defaults.node_id, 1);
        assert_eq!(defaults.socket_request_max_bytes, 104_857_600);
        assert_eq!(defaults.log_flush_scheduler_interval_ms, i64::MAX as u64);
        assert_eq!(defaults.quota_window.window_ms, 1000);
        assert_eq!(defaults.replication.replica_lag_time_max_ms, 30_000);
        assert_eq!(defaults.replication.inter_broker_listener_name, None);
        assert!(defaults.quorum.is_voter() && defaults.metrics_port.is_none());
        assert_eq!(defaults.log_defaults, LogConfig::default());
        let given = BrokerSettings::from_config(&[
            ("quota.window.size.seconds", "2"),
            ("process.roles", "broker"),
            ("log.dirs", "/a,/b"),
            ("replica.lag.time.max.ms", "500"),
            ("log.segment.bytes", "2097152"),
            ("krust.metrics.port", "9404"),
        ])
        .unwrap();
        assert_eq!(given.quota_window.window_ms, 2000);
        assert!(!given.quorum.is_voter());
        assert_eq!(given.log_dirs, [PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(given.replication.replica_lag_time_max_ms, 500);
        assert_eq!(given.log_defaults.segment_bytes, 2_097_152);
        assert_eq!(given.metrics_port, Some(9404));
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
