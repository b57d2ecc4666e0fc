//! Kafka-compatible log storage: Kafka's on-disk layout, byte for byte, so Kafka's own tools
//! (`kafka-dump-log`, `DumpLogSegments`) read what krust writes.
//!
//! Reading order, from bytes up:
//! - [`batch`]: RecordBatch v2 header view — parse, check (CRC32C), patch; [`records`]: a cheap
//!   structural walk over records, in place or through bounded streaming decompression.
//! - [`validate`]: Kafka's `LogValidator` checks for produced record sets.
//! - [`offset_index`], [`time_index`]: the mmap'd sparse `.index` / `.timeindex` files.
//! - [`segment`]: `LogSegment`, one `.log` file with its indexes; [`file_records`]: positional
//!   reads of it.
//! - [`producer_state`], [`producer_snapshot`]: idempotent-producer state, ongoing
//!   transactions (KIP-98) and its snapshots; [`control_batch`]: transaction markers;
//!   [`txn_index`]: a segment's `.txnindex` of aborted transactions.
//! - [`leader_epoch`], [`checkpoint`], [`partition_metadata`]: the small text files Kafka keeps.
//! - [`log`]: `Log`, one partition; [`fetch`]: reading it; [`recovery`]: loading it after a
//!   clean or unclean stop.
//! - `follower`: a follower's appends (the leader's offsets kept) and truncations.
//! - [`retention`]: deleting old segments by `retention.ms` / `retention.bytes` and below the
//!   log start offset (which DeleteRecords moves).
//! - [`scheduler`]: the background thread that flushes rolled segments and removes deleted
//!   segments' files after `file.delete.delay.ms`.
//! - [`cleaner`]: the log cleaner, compacting logs whose `cleanup.policy` has `compact`;
//!   [`batch_builder`] writes the batches it (and `compression.type`'s recompression) rebuilds.
//! - [`log_manager`]: every log under `log.dirs`, each dir held by a [`log_dir_lock`];
//!   [`log_dir_failure`]: the dirs that failed; [`log_dir_move`]: moving a replica to another
//!   log dir through a future log (AlterReplicaLogDirs).
//! - [`kraft_snapshot`]: KRaft's metadata snapshot files (`.checkpoint`), which let the
//!   metadata log shed the records they stand in for.
//! - [`append_origin`]: who appends (client, coordinator, replication) and what each may write.
//! - [`config`]: `LogConfig`, with defaults and bounds from the config table (`krust-config`),
//!   shared with the Python layer.

pub mod append_origin;
pub mod batch;
mod batch_builder;
pub mod checkpoint;
pub mod cleaner;
mod codec;
mod compression;
pub mod config;
pub mod control_batch;
pub mod error;
pub mod fetch;
mod file_records;
mod follower;
mod index_file;
pub mod kraft_snapshot;
pub mod leader_epoch;
pub mod log;
pub mod log_dir_failure;
pub mod log_dir_lock;
pub mod log_dir_move;
mod log_file_utils;
pub mod log_manager;
pub mod offset_index;
pub mod partition_metadata;
pub mod producer_snapshot;
pub mod producer_state;
mod recompress;
pub mod records;
mod recovery;
pub mod retention;
pub mod scheduler;
pub mod segment;
pub mod time_index;
pub mod topic_partition;
pub mod txn_index;
mod validate;

/// What the cargo-fuzz targets in `fuzz/` drive; not part of the crate's API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use crate::{AppendError, AppendOrigin, LogConfig};

    /// `LogValidator` on a record set a client produced: the number of batches that passed.
    pub fn validate_records(
        records: &[u8],
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<usize, AppendError> {
        let topic_partition = crate::TopicPartition::new("fuzz", 0);
        let target = crate::validate::Target {
            topic_partition: &topic_partition,
            config,
        };
        crate::validate::validate_records(records, &target, AppendOrigin::Client, now_ms)
            .map(|batches| batches.len())
    }
}

#[cfg(test)]
mod follower_tests;
#[cfg(test)]
mod log_dir_move_tests;
#[cfg(test)]
mod log_dir_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod txn_tests;

pub use append_origin::AppendOrigin;
pub use batch_builder::{build_batch, records_area, Codec, MAX_DECOMPRESSED_BYTES};
pub use cleaner::{CleanStats, CleanerConfig, CleanerStatus};
pub use compression::{decompress_payload, PayloadError};
pub use config::{CleanupPolicy, CompressionType, LogConfig, TimestampType};
pub use control_batch::{end_txn_marker, transactional_coordinator_batch, EndTxnMarker};
pub use error::{AppendError, BatchError, ReadError, RecordError, StorageError};
pub use fetch::{FetchDataInfo, ReadPlan};
pub use file_records::FileSlice;
pub use log::{FlushTask, LoadParams, Log, LogAppendInfo};
pub use log_dir_failure::LogDirFailureChannel;
pub use log_dir_move::MoveProgress;
pub use log_manager::{LogManager, LogSpec, SharedLog, CLEAN_SHUTDOWN_FILE};
pub use producer_state::ProducerStateEntry;
pub use recovery::RecoveryStats;
pub use retention::{DeletableSegment, DeleteRecordsError, DeletionReason, SegmentDeletion};
pub use segment::TimestampAndOffset;
pub use topic_partition::TopicPartition;
pub use txn_index::AbortedTxn;
