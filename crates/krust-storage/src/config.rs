//! `LogConfig`: the per-topic settings the storage layer obeys, with Kafka's names and defaults.

use krust_config::{topic_key, ConfigValueError, ConfigValues};

/// `message.timestamp.type`: whose clock stamps a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// The producer's timestamps are kept.
    #[default]
    CreateTime,
    /// The broker stamps each batch with its own clock at append time.
    LogAppendTime,
}

/// `cleanup.policy`: what happens to old segments; `delete`, `compact`, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CleanupPolicy {
    /// Segments past `retention.ms` / `retention.bytes` are deleted.
    pub delete: bool,
    /// The log cleaner keeps the latest record of each key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        Self {
            delete: true,
            compact: false,
        }
    }
}

impl CleanupPolicy {
    fn parse(raw: &str) -> Result<Self, ConfigValueError> {
        let key = topic_key(CLEANUP_POLICY)?;
        key.validate(raw)?;
        let items: Vec<&str> = raw.split(',').map(str::trim).collect();
        Ok(Self {
            delete: items.contains(&"delete"),
            compact: items.contains(&"compact"),
        })
    }
}

/// `compression.type`: the codec stored batches use; `Producer` keeps the producer's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CompressionType {
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    fn parse(raw: &str) -> Result<Self, ConfigValueError> {
        Ok(match topic_key(COMPRESSION_TYPE)?.parse_choice(raw)? {
            "uncompressed" => Self::Uncompressed,
            "gzip" => Self::Gzip,
            "snappy" => Self::Snappy,
            "lz4" => Self::Lz4,
            "zstd" => Self::Zstd,
            _ => Self::Producer,
        })
    }
}

/// `compression.gzip.level`: -1 (the codec's default) or 1..9, as Kafka's `GzipCompression`.
fn parse_gzip_level(raw: &str) -> Result<i32, ConfigValueError> {
    let key = topic_key(GZIP_LEVEL)?;
    let level = key.parse_int(raw)?;
    if level == -1 || (1..=9).contains(&level) {
        Ok(level as i32)
    } else {
        Err(ConfigValueError::Invalid {
            key: GZIP_LEVEL.to_string(),
            value: raw.to_string(),
            problem: "value must be -1 or in [1, 9]".to_string(),
        })
    }
}

/// Topic-level log settings (Kafka topic-config semantics; the names map 1:1 to Kafka keys).
/// `PartialEq` only: `min.cleanable.dirty.ratio` is a DOUBLE.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when a segment would grow past this size.
    pub segment_bytes: i32,
    /// `segment.ms`: roll when the segment's first timestamp is this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: the preallocated (maximum) size of each index file.
    pub segment_index_bytes: i32,
    /// `index.interval.bytes`: bytes appended between two offset-index entries.
    pub index_interval_bytes: i32,
    /// `max.message.bytes`: the largest record batch accepted (whole batch, compressed size).
    pub max_message_bytes: i32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime timestamp may be.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime timestamp may be.
    pub message_timestamp_after_max_ms: i64,
    /// `flush.messages`: fsync after this many appended records.
    pub flush_interval_messages: i64,
    /// `flush.ms`: fsync when the last flush is this old.
    pub flush_interval_ms: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `min.insync.replicas`: fewest in-sync replicas an acks=all produce needs.
    pub min_insync_replicas: i32,
    /// `retention.ms`: delete segments whose newest record is older than this; -1: forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest segments while the log stays at least this big
    /// without them; -1: no limit.
    pub retention_bytes: i64,
    /// `file.delete.delay.ms`: how long a deleted segment's `.deleted` files stay on disk.
    pub file_delete_delay_ms: i64,
    /// `segment.jitter.ms`: the most a segment's time-based roll is brought forward by chance.
    pub segment_jitter_ms: i64,
    /// `delete.retention.ms`: how long the cleaner keeps a tombstone after its first clean.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are never compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes its log due for cleaning.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: the dirty share of a log at which the cleaner picks it.
    pub min_cleanable_dirty_ratio: f64,
    /// `compression.type`.
    pub compression_type: CompressionType,
    /// `compression.gzip.level`.
    pub compression_gzip_level: i32,
    /// `compression.lz4.level`.
    pub compression_lz4_level: i32,
    /// `compression.zstd.level`.
    pub compression_zstd_level: i32,
}

/// The topic keys `LogConfig` holds, with the integer fields they set. `segment.bytes` and Kafka's
/// test-only `internal.segment.bytes` both set the segment size; the field holds the size in
/// force, so it is checked against the laxer internal key's bound.
const INTEGER_FIELDS: &[(&str, FieldOf)] = &[
    ("segment.bytes", |c| IntegerField::Int(&mut c.segment_bytes)),
    ("internal.segment.bytes", |c| {
        IntegerField::Int(&mut c.segment_bytes)
    }),
    ("segment.ms", |c| IntegerField::Long(&mut c.segment_ms)),
    ("segment.index.bytes", |c| {
        IntegerField::Int(&mut c.segment_index_bytes)
    }),
    ("index.interval.bytes", |c| {
        IntegerField::Int(&mut c.index_interval_bytes)
    }),
    ("max.message.bytes", |c| {
        IntegerField::Int(&mut c.max_message_bytes)
    }),
    ("message.timestamp.before.max.ms", |c| {
        IntegerField::Long(&mut c.message_timestamp_before_max_ms)
    }),
    ("message.timestamp.after.max.ms", |c| {
        IntegerField::Long(&mut c.message_timestamp_after_max_ms)
    }),
    ("flush.messages", |c| {
        IntegerField::Long(&mut c.flush_interval_messages)
    }),
    ("flush.ms", |c| IntegerField::Long(&mut c.flush_interval_ms)),
    ("min.insync.replicas", |c| {
        IntegerField::Int(&mut c.min_insync_replicas)
    }),
    ("retention.ms", |c| IntegerField::Long(&mut c.retention_ms)),
    ("retention.bytes", |c| {
        IntegerField::Long(&mut c.retention_bytes)
    }),
    ("file.delete.delay.ms", |c| {
        IntegerField::Long(&mut c.file_delete_delay_ms)
    }),
    ("segment.jitter.ms", |c| {
        IntegerField::Long(&mut c.segment_jitter_ms)
    }),
    ("delete.retention.ms", |c| {
        IntegerField::Long(&mut c.delete_retention_ms)
    }),
    ("min.compaction.lag.ms", |c| {
        IntegerField::Long(&mut c.min_compaction_lag_ms)
    }),
    ("max.compaction.lag.ms", |c| {
        IntegerField::Long(&mut c.max_compaction_lag_ms)
    }),
    ("compression.lz4.level", |c| {
        IntegerField::Int(&mut c.compression_lz4_level)
    }),
    ("compression.zstd.level", |c| {
        IntegerField::Int(&mut c.compression_zstd_level)
    }),
];

const TIMESTAMP_TYPE: &str = "message.timestamp.type";
const CLEANUP_POLICY: &str = "cleanup.policy";
const COMPRESSION_TYPE: &str = "compression.type";
const GZIP_LEVEL: &str = "compression.gzip.level";
const DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";

/// Selects one integer field of a `LogConfig`.
type FieldOf = fn(&mut LogConfig) -> IntegerField<'_>;

enum IntegerField<'a> {
    Int(&'a mut i32),
    Long(&'a mut i64),
}

impl IntegerField<'_> {
    fn get(&self) -> i64 {
        match self {
            IntegerField::Int(slot) => i64::from(**slot),
            IntegerField::Long(slot) => **slot,
        }
    }

    /// Stores a value the table's type check has already bounded to the field's type.
    fn set(self, value: i64) {
        match self {
            IntegerField::Int(slot) => *slot = i32::try_from(value).unwrap_or(i32::MAX),
            IntegerField::Long(slot) => *slot = value,
        }
    }
}

impl TimestampType {
    fn parse(raw: &str) -> Result<Self, ConfigValueError> {
        match topic_key(TIMESTAMP_TYPE)?.parse_choice(raw)? {
            "LogAppendTime" => Ok(TimestampType::LogAppendTime),
            _ => Ok(TimestampType::CreateTime),
        }
    }
}

impl Default for LogConfig {
    /// Kafka's defaults, read from the config table.
    fn default() -> Self {
        let mut config = Self {
            segment_bytes: 0,
            segment_ms: 0,
            segment_index_bytes: 0,
            index_interval_bytes: 0,
            max_message_bytes: 0,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: 0,
            message_timestamp_after_max_ms: 0,
            flush_interval_messages: 0,
            flush_interval_ms: 0,
            cleanup_policy: CleanupPolicy::default(),
            min_insync_replicas: 0,
            retention_ms: 0,
            retention_bytes: 0,
            file_delete_delay_ms: 0,
            segment_jitter_ms: 0,
            delete_retention_ms: 0,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio: 0.0,
            compression_type: CompressionType::Producer,
            compression_gzip_level: 0,
            compression_lz4_level: 0,
            compression_zstd_level: 0,
        };
        for &(name, field) in INTEGER_FIELDS {
            // The internal key has no default: the segment size comes from segment.bytes.
            if let Ok(key) = topic_key(name) {
                if key.default.is_some() {
                    field(&mut config).set(key.default_int());
                }
            }
        }
        if let Some(default) = topic_key(TIMESTAMP_TYPE)
            .ok()
            .and_then(|k| k.default.as_deref())
        {
            config.message_timestamp_type =
                TimestampType::parse(default).expect("the table's default is one of its choices");
        }
        if let Some(default) = topic_key(CLEANUP_POLICY)
            .ok()
            .and_then(|k| k.default.as_deref())
        {
            config.cleanup_policy =
                CleanupPolicy::parse(default).expect("the table's default is valid");
        }
        for name in [COMPRESSION_TYPE, GZIP_LEVEL, DIRTY_RATIO] {
            if let Some(default) = topic_key(name).ok().and_then(|k| k.default.as_deref()) {
                config
                    .apply_override(name, default)
                    .expect("the table's default is valid");
            }
        }
        config
    }
}

impl LogConfig {
    /// The broker-wide defaults of the topic keys: each topic key's value is its first broker
    /// synonym's (Kafka's ServerTopicConfigSynonyms; `log.roll.ms` for `segment.ms`, say),
    /// else the topic key's own default.
    pub fn from_config(values: &dyn ConfigValues) -> Result<Self, ConfigValueError> {
        let mut config = Self::default();
        for key in &krust_config::table().topic {
            let Some(broker) = key.synonyms.first() else {
                continue;
            };
            if let Some(raw) = values.value(broker) {
                config
                    .apply_override(&key.name, &raw)
                    .map_err(|error| match error {
                        ConfigValueError::Invalid { value, problem, .. } => {
                            ConfigValueError::Invalid {
                                key: broker.clone(),
                                value,
                                problem,
                            }
                        }
                        other => other,
                    })?;
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Applies one topic-level override (a Kafka topic config name and its text value), checked
    /// against the config table; keys the storage layer does not use are checked and ignored.
    pub fn apply_override(&mut self, name: &str, raw: &str) -> Result<(), ConfigValueError> {
        let key = topic_key(name)?;
        key.validate(raw)?;
        if name == TIMESTAMP_TYPE {
            self.message_timestamp_type = TimestampType::parse(raw)?;
        } else if name == CLEANUP_POLICY {
            self.cleanup_policy = CleanupPolicy::parse(raw)?;
        } else if name == COMPRESSION_TYPE {
            self.compression_type = CompressionType::parse(raw)?;
        } else if name == GZIP_LEVEL {
            self.compression_gzip_level = parse_gzip_level(raw)?;
        } else if name == DIRTY_RATIO {
            self.min_cleanable_dirty_ratio =
                raw.trim().parse().expect("validated as a DOUBLE above");
        } else if let Some((_, field)) = INTEGER_FIELDS.iter().find(|(field, _)| *field == name) {
            field(self).set(key.parse_int(raw)?);
        }
        Ok(())
    }

    /// Rejects values outside the config table's bounds.
    pub fn validate(&self) -> Result<(), ConfigValueError> {
        let mut copy = self.clone();
        for &(name, field) in INTEGER_FIELDS {
            if name == "segment.bytes" {
                continue;
            }
            topic_key(name)?.check_bounds(field(&mut copy).get())?;
        }
        topic_key(DIRTY_RATIO)?.validate(&self.min_cleanable_dirty_ratio.to_string())?;
        parse_gzip_level(&self.compression_gzip_level.to_string())?;
        Ok(())
    }

    pub(crate) fn segment_bytes(&self) -> u64 {
        u64::try_from(self.segment_bytes).unwrap_or(0)
    }

    pub(crate) fn max_message_bytes(&self) -> usize {
        usize::try_from(self.max_message_bytes).unwrap_or(0)
    }

    pub(crate) fn index_interval_bytes(&self) -> u64 {
        u64::try_from(self.index_interval_bytes).unwrap_or(0)
    }

    pub(crate) fn max_index_bytes(&self) -> u64 {
        u64::try_from(self.segment_index_bytes).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krust_config::ConfigType;

    #[test]
    fn defaults_are_the_tables_and_kafkas() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.segment_index_bytes, 10_485_760);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
        assert_eq!(c.message_timestamp_before_max_ms, i64::MAX);
        // Kafka 4.0 (KIP-1030) bounds future timestamps to one hour by default.
        assert_eq!(c.message_timestamp_after_max_ms, 3_600_000);
        assert_eq!(c.flush_interval_messages, i64::MAX);
        assert_eq!(c.flush_interval_ms, i64::MAX);
        assert_eq!(c.cleanup_policy, CleanupPolicy::default());
        assert_eq!(c.min_insync_replicas, 1);
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.file_delete_delay_ms, 60_000);
        assert_eq!(c.segment_jitter_ms, 0);
        assert!(c.validate().is_ok());
        let mut copy = c.clone();
        for &(name, field) in INTEGER_FIELDS {
            if let Some(default) = &topic_key(name).unwrap().default {
                assert_eq!(field(&mut copy).get().to_string(), *default, "{name}");
            }
        }
    }

    #[test]
    fn every_key_the_core_reads_is_an_integer_or_choice_without_a_python_only_check() {
        for &(name, _) in INTEGER_FIELDS {
            let key = topic_key(name).unwrap();
            assert!(
                matches!(key.config_type, ConfigType::Int | ConfigType::Long),
                "{name}"
            );
            assert!(key.check.is_none(), "{name}");
        }
        let timestamp_type = topic_key(TIMESTAMP_TYPE).unwrap();
        assert!(timestamp_type.check.is_none() && !timestamp_type.choices.is_empty());
    }

    #[test]
    fn broker_defaults_are_read_from_each_topic_keys_first_broker_synonym() {
        let given = [
            ("log.roll.ms", "60000"),
            ("log.roll.hours", "1"),
            ("message.max.bytes", "2000000"),
            ("log.cleanup.policy", "compact"),
            ("log.cleaner.min.cleanable.ratio", "0.25"),
        ];
        let config = LogConfig::from_config(&given).unwrap();
        assert_eq!(config.segment_ms, 60_000);
        assert_eq!(config.max_message_bytes, 2_000_000);
        assert!(config.cleanup_policy.compact && !config.cleanup_policy.delete);
        assert_eq!(config.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(config.retention_ms, LogConfig::default().retention_ms);
        let refused = [("log.index.size.max.bytes", "8")];
        let error = LogConfig::from_config(&refused).unwrap_err();
        assert!(
            error.to_string().contains("log.index.size.max.bytes"),
            "{error}"
        );
    }

    #[test]
    fn the_cleaner_and_compression_keys_have_kafkas_defaults_and_bounds() {
        let c = LogConfig::default();
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.min_compaction_lag_ms, 0);
        assert_eq!(c.max_compaction_lag_ms, i64::MAX);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(c.compression_type, CompressionType::Producer);
        assert_eq!(
            (
                c.compression_gzip_level,
                c.compression_lz4_level,
                c.compression_zstd_level
            ),
            (-1, 9, 3)
        );
        let mut c = LogConfig::default();
        c.apply_override("compression.type", "zstd").unwrap();
        c.apply_override("compression.gzip.level", "9").unwrap();
        c.apply_override("min.cleanable.dirty.ratio", "0.01")
            .unwrap();
        assert_eq!(c.compression_type, CompressionType::Zstd);
        assert_eq!(c.compression_gzip_level, 9);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        for (key, bad) in [
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "10"),
            ("compression.lz4.level", "18"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("compression.type", "brotli"),
        ] {
            let error = c.apply_override(key, bad).unwrap_err().to_string();
            assert!(error.contains(key), "{error}");
        }
        let bad_ratio = LogConfig {
            min_cleanable_dirty_ratio: -0.1,
            ..LogConfig::default()
        };
        assert!(bad_ratio.validate().is_err());
    }

    #[test]
    fn rejects_what_the_table_rejects() {
        let c = LogConfig {
            segment_bytes: 0,
            ..LogConfig::default()
        };
        assert!(c.validate().is_err());
        let c = LogConfig {
            segment_index_bytes: 8,
            ..LogConfig::default()
        };
        let error = c.validate().unwrap_err().to_string();
        assert!(error.contains("segment.index.bytes"), "{error}");
        // Kafka allows an index entry for every batch.
        let c = LogConfig {
            index_interval_bytes: 0,
            ..LogConfig::default()
        };
        assert!(c.validate().is_ok());
    }

    #[test]
    fn overrides_are_parsed_and_bounded_by_the_table() {
        let mut c = LogConfig::default();
        c.apply_override("segment.bytes", "2097152").unwrap();
        c.apply_override("message.timestamp.type", "LogAppendTime")
            .unwrap();
        c.apply_override("retention.ms", "-1").unwrap();
        c.apply_override("retention.bytes", "1048576").unwrap();
        assert_eq!((c.retention_ms, c.retention_bytes), (-1, 1_048_576));
        c.apply_override("cleanup.policy", "compact,delete")
            .unwrap();
        assert_eq!(
            c.cleanup_policy,
            CleanupPolicy {
                delete: true,
                compact: true
            }
        );
        c.apply_override("cleanup.policy", "compact").unwrap();
        assert!(c.cleanup_policy.compact && !c.cleanup_policy.delete);
        assert_eq!(c.segment_bytes, 2_097_152);
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        let before = c.clone();
        assert!(c.apply_override("segment.bytes", "1000").is_err());
        assert!(c.apply_override("segment.index.bytes", "8").is_err());
        assert!(c.apply_override("retention.ms", "-2").is_err());
        assert!(c.apply_override("message.timestamp.type", "Later").is_err());
        assert!(c.apply_override("cleanup.policy", "archive").is_err());
        assert!(c.apply_override("no.such.key", "1").is_err());
        assert_eq!(c, before);
        c.apply_override("internal.segment.bytes", "1000").unwrap();
        assert_eq!(c.segment_bytes, 1000);
    }

    #[test]
    fn min_insync_replicas_is_read_and_bounded() {
        let mut c = LogConfig::default();
        c.apply_override("min.insync.replicas", "2").unwrap();
        assert_eq!(c.min_insync_replicas, 2);
        let error = c
            .apply_override("min.insync.replicas", "0")
            .unwrap_err()
            .to_string();
        assert!(error.contains("min.insync.replicas"), "{error}");
        assert_eq!(c.min_insync_replicas, 2);
    }
}
