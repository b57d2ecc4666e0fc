//! What names KRaft's metadata log, `__cluster_metadata-0`, for every layer: its topic and its
//! own settings. The replica manager hosts the log and its snapshots
//! (`replica::replica_manager::metadata_log`).

pub const METADATA_LOG_TOPIC: &str = "__cluster_metadata";

krust_config::config_settings! {
    /// The metadata log's own settings (Kafka's `metadata.*` broker keys).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct MetadataLogSettings {
        pub segment_bytes: i32 = "metadata.log.segment.bytes",
        pub segment_ms: i64 = "metadata.log.segment.ms",
        /// -1: no size limit.
        pub max_retention_bytes: i64 = "metadata.max.retention.bytes",
        /// -1: no time limit.
        pub max_retention_ms: i64 = "metadata.max.retention.ms",
    }
}
