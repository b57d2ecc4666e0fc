//! The broker settings the core needs, already validated by the Python config layer.

use std::path::PathBuf;

use krust_storage::{LogConfig, TimestampType};

use crate::session::SecurityProtocol;

/// One listener: a name (e.g. PLAINTEXT), the address to bind and its security protocol.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// From listener.security.protocol.map.
    pub security_protocol: SecurityProtocol,
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
    /// connections.max.idle.ms
    pub connections_max_idle_ms: u64,
    /// log.flush.scheduler.interval.ms
    pub log_flush_scheduler_interval_ms: u64,
    /// The broker-wide defaults of every topic-level log setting (message.max.bytes, log.segment.bytes, ...).
    pub log_defaults: LogConfig,
}

impl Default for BrokerSettings {
    fn default() -> Self {
        let plaintext = Listener {
            name: "PLAINTEXT".into(),
            host: "localhost".into(),
            port: 9092,
            security_protocol: SecurityProtocol::Plaintext,
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
            log_flush_scheduler_interval_ms: u64::MAX,
            log_defaults: LogConfig::default(),
        }
    }
}

/// Applies topic-level overrides (Kafka topic config names) on top of the broker defaults.
/// Values were validated by the controller when the config was set, so a value that does not
/// parse keeps the default.
pub fn topic_log_config(
    defaults: &LogConfig,
    overrides: &std::collections::HashMap<String, String>,
) -> LogConfig {
    let mut config = defaults.clone();
    for (name, value) in overrides {
        match name.as_str() {
            "segment.bytes" => set_parsed(&mut config.segment_bytes, value),
            "segment.ms" => set_parsed(&mut config.segment_ms, value),
            "segment.index.bytes" => set_parsed(&mut config.segment_index_bytes, value),
            "index.interval.bytes" => set_parsed(&mut config.index_interval_bytes, value),
            "max.message.bytes" => set_parsed(&mut config.max_message_bytes, value),
            "flush.messages" => set_parsed(&mut config.flush_interval_messages, value),
            "flush.ms" => set_parsed(&mut config.flush_interval_ms, value),
            "message.timestamp.type" => match value.as_str() {
                "CreateTime" => config.message_timestamp_type = TimestampType::CreateTime,
                "LogAppendTime" => config.message_timestamp_type = TimestampType::LogAppendTime,
                _ => {}
            },
            _ => {}
        }
    }
    config
}

fn set_parsed<T: std::str::FromStr>(slot: &mut T, value: &str) {
    if let Ok(parsed) = value.parse() {
        *slot = parsed;
    }
}
