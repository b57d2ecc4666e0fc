//! Typed errors, each mapped to the Kafka error code a client should see.

use std::io;
use std::path::PathBuf;

use kafka_protocol::error::ResponseError;
use thiserror::Error;

use crate::codec::Compression;
use krust_config::ConfigValueError;

/// Why a single record batch is not acceptable as it stands.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch is truncated: {available} bytes available, {needed} needed")]
    Truncated { available: usize, needed: usize },
    #[error("record batch has an illegal length {0}")]
    IllegalLength(i32),
    #[error("record batch magic {0} is not supported (only v2)")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    #[error("record batch does not decompress as {compression:?}: {reason}")]
    Undecompressable {
        compression: Compression,
        reason: String,
    },
}

impl BatchError {
    /// The Kafka error code for this problem.
    pub fn kafka_error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// The codec crate's error for this problem.
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::Truncated { .. }
            | Self::IllegalLength(_)
            | Self::CrcMismatch { .. }
            | Self::Undecompressable { .. } => ResponseError::CorruptMessage,
            Self::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
            Self::InvalidRecord(_) => ResponseError::InvalidRecord,
        }
    }
}

/// One refused record of a produced batch (Kafka's `ProduceResponse.RecordError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index in its batch.
    pub batch_index: i32,
    pub message: String,
}

impl std::fmt::Display for RecordError {
    /// As Java prints it, since Kafka's Produce `error_message` lists them that way.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RecordError(batchIndex={}, message='{}')",
            self.batch_index, self.message
        )
    }
}

/// Why `Log::append_as_leader` refused (or failed to store) a produced record set.
#[derive(Debug, Error)]
pub enum AppendError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("record set of {size} bytes exceeds segment.bytes {segment_bytes}")]
    RecordListTooLarge { size: usize, segment_bytes: usize },
    #[error("timestamp {timestamp} is out of the accepted range at {now_ms}")]
    InvalidTimestamp { timestamp: i64, now_ms: i64 },
    #[error(
        "producer {producer_id}: sequence {found} does not follow {expected_after} (epoch {epoch})"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        expected_after: i32,
        found: i32,
    },
    #[error("producer {producer_id}: epoch {found} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        found: i16,
    },
    /// KIP-98: a producer with an open transaction sent a non-transactional batch.
    #[error("producer {producer_id}: a non-transactional batch at offset {offset} while its transaction is open")]
    InvalidTxnState { producer_id: i64, offset: i64 },
    /// KIP-98: a marker from a coordinator older than one already seen (a zombie).
    #[error("producer {producer_id}: marker of coordinator epoch {found} is older than {current}")]
    TransactionCoordinatorFenced {
        producer_id: i64,
        current: i32,
        found: i32,
    },
    /// Kafka's `RecordValidationException`: records refused one by one (INVALID_RECORD).
    #[error("{message}")]
    InvalidRecords {
        record_errors: Vec<RecordError>,
        message: String,
    },
    #[error("the log is closed or was deleted")]
    LogClosed,
    #[error(
        "a follower keeps its leader's offsets: replicated batches cannot be appended as leader"
    )]
    ReplicationAsLeader,
    /// Kafka's `UnexpectedAppendOffsetException`: a follower's batches must start at or
    /// after its log end offset.
    #[error(
        "replicated batches start at {first_offset}, below the log end offset {log_end_offset}"
    )]
    UnexpectedAppendOffset {
        first_offset: i64,
        log_end_offset: i64,
    },
    #[error("storage failure: {0}")]
    Storage(#[from] io::Error),
}

impl AppendError {
    /// Kafka's `processRecordErrors`: every refused record, and a message listing at most three.
    pub fn invalid_records(record_errors: Vec<RecordError>) -> Self {
        let shown: Vec<String> = record_errors
            .iter()
            .take(3)
            .map(ToString::to_string)
            .collect();
        let message = format!(
            "One or more records have been rejected due to {} record errors in total, and only \
             showing the first three errors at most: [{}]",
            record_errors.len(),
            shown.join(", ")
        );
        Self::InvalidRecords {
            record_errors,
            message,
        }
    }

    /// The Kafka error code for the Produce response.
    pub fn kafka_error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// The codec crate's error for this problem.
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::Batch(e) => e.response_error(),
            Self::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            Self::RecordListTooLarge { .. } => ResponseError::RecordListTooLarge,
            Self::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
            Self::InvalidRecords { .. } => ResponseError::InvalidRecord,
            Self::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
            Self::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            Self::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
            Self::TransactionCoordinatorFenced { .. } => {
                ResponseError::TransactionCoordinatorFenced
            }
            Self::LogClosed | Self::Storage(_) => ResponseError::KafkaStorageError,
            Self::ReplicationAsLeader | Self::UnexpectedAppendOffset { .. } => {
                ResponseError::UnknownServerError
            }
        }
    }
}

/// Why a read (Fetch / ListOffsets) could not be served.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("offset {offset} is outside the log range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("the log is closed or was deleted")]
    LogClosed,
    #[error("storage failure: {0}")]
    Storage(#[from] io::Error),
}

impl ReadError {
    /// The Kafka error code for the Fetch / ListOffsets response.
    pub fn kafka_error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// The codec crate's error for this problem.
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            Self::LogClosed | Self::Storage(_) => ResponseError::KafkaStorageError,
        }
    }
}

/// Failures while opening, flushing, checkpointing or deleting logs.
#[derive(Debug, Error)]
pub enum StorageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: malformed file: {reason}")]
    Malformed { path: PathBuf, reason: String },
    #[error("{dir}: partition.metadata names a different topic id")]
    InconsistentTopicId { dir: PathBuf },
    #[error("invalid topic name {0:?}")]
    InvalidTopicName(String),
    #[error("{0} is present in more than one log dir")]
    DuplicateLog(String),
    #[error("invalid log configuration: {0}")]
    InvalidConfig(String),
    #[error("invalid log configuration: {0}")]
    InvalidConfigValue(#[from] ConfigValueError),
    #[error("the log is closed or was deleted")]
    LogClosed,
    #[error("every log dir is offline")]
    AllLogDirsOffline,
    #[error("log dir {dir} is in use by another process (it holds {dir}/.lock): is another broker running on it?")]
    LogDirLocked { dir: PathBuf },
    #[error("log dir {0} is not found in the config")]
    LogDirNotFound(String),
    #[error("log dir {0} is offline")]
    LogDirOffline(PathBuf),
}

impl StorageError {
    /// The Kafka error code a request touching this log should get.
    pub fn kafka_error_code(&self) -> i16 {
        self.response_error().code()
    }

    /// The codec crate's error for this problem.
    pub fn response_error(&self) -> ResponseError {
        match self {
            Self::InconsistentTopicId { .. } => ResponseError::InconsistentTopicId,
            Self::InvalidTopicName(_) => ResponseError::InvalidTopicException,
            Self::InvalidConfig(_) | Self::InvalidConfigValue(_) => ResponseError::InvalidConfig,
            Self::LogDirNotFound(_) => ResponseError::LogDirNotFound,
            _ => ResponseError::KafkaStorageError,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StorageError {
        let path = path.into();
        move |source| StorageError::Io { path, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_match_kafka() {
        let magic = AppendError::from(BatchError::UnsupportedMagic(1));
        assert_eq!(magic.kafka_error_code(), 43);
        let crc = AppendError::from(BatchError::CrcMismatch {
            stored: 1,
            computed: 2,
        });
        assert_eq!(crc.kafka_error_code(), 2);
        let big = AppendError::MessageTooLarge { size: 2, max: 1 };
        assert_eq!(big.kafka_error_code(), 10);
        let list = AppendError::RecordListTooLarge {
            size: 2,
            segment_bytes: 1,
        };
        assert_eq!(list.kafka_error_code(), 18);
        let range = ReadError::OffsetOutOfRange {
            offset: 9,
            log_start_offset: 0,
            log_end_offset: 1,
        };
        assert_eq!(range.kafka_error_code(), 1);
        assert_eq!(AppendError::LogClosed.kafka_error_code(), 56);
    }
}
