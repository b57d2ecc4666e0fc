//! `LogConfig`: the per-topic settings the storage layer obeys, with Kafka's names and defaults.

use crate::error::StorageError;

/// `message.timestamp.type`: whose clock stamps a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// The producer's timestamps are kept.
    #[default]
    CreateTime,
    /// The broker stamps each batch with its own clock at append time.
    LogAppendTime,
}

/// Topic-level log settings (Kafka topic-config semantics; the names map 1:1 to Kafka keys).
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_message_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            // Kafka 4.0 (KIP-1030) bounds future timestamps to one hour by default.
            message_timestamp_after_max_ms: 60 * 60 * 1000,
            flush_interval_messages: i64::MAX,
            flush_interval_ms: i64::MAX,
        }
    }
}

impl LogConfig {
    /// Rejects values Kafka's topic-config validator would reject.
    pub fn validate(&self) -> Result<(), StorageError> {
        let positive = [
            ("segment.bytes", i64::from(self.segment_bytes)),
            ("segment.ms", self.segment_ms),
            ("index.interval.bytes", i64::from(self.index_interval_bytes)),
            ("max.message.bytes", i64::from(self.max_message_bytes)),
            ("flush.messages", self.flush_interval_messages),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return Err(StorageError::InvalidConfig(format!(
                    "{name} must be > 0, got {value}"
                )));
            }
        }
        let non_negative = [
            ("flush.ms", self.flush_interval_ms),
            (
                "message.timestamp.before.max.ms",
                self.message_timestamp_before_max_ms,
            ),
            (
                "message.timestamp.after.max.ms",
                self.message_timestamp_after_max_ms,
            ),
        ];
        for (name, value) in non_negative {
            if value < 0 {
                return Err(StorageError::InvalidConfig(format!(
                    "{name} must be >= 0, got {value}"
                )));
            }
        }
        // Each index must hold at least one time-index entry (the larger entry kind).
        if self.segment_index_bytes < 12 {
            return Err(StorageError::InvalidConfig(format!(
                "segment.index.bytes must be >= 12, got {}",
                self.segment_index_bytes
            )));
        }
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

    #[test]
    fn defaults_are_kafkas() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.segment_index_bytes, 10_485_760);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
        assert_eq!(c.flush_interval_messages, i64::MAX);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn rejects_nonsense() {
        let c = LogConfig {
            segment_bytes: 0,
            ..LogConfig::default()
        };
        assert!(c.validate().is_err());
        let c = LogConfig {
            segment_index_bytes: 8,
            ..LogConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
