//! Retention and the log start offset (Kafka's `UnifiedLog.deleteOldSegments` and
//! `maybeIncrementLogStartOffset`).
//!
//! A retention pass deletes whole segments from the oldest on: first those past `retention.ms`,
//! then those the log can spare while it stays at or above `retention.bytes`, then those wholly
//! below the log start offset (which DeleteRecords moves). The first two apply only to topics
//! whose `cleanup.policy` includes `delete`; the third to every log. No segment holding offsets
//! at or above the high watermark is deleted, nor an empty active segment; when every segment
//! goes, the log rolls first so that it keeps one. The log start offset then advances to the
//! first remaining segment.
//!
//! A deleted segment leaves the log at once, so no new read finds it, and its files are renamed
//! `*.deleted`; `LogManager::cleanup_logs`, the pass over every log, has the scheduler remove
//! them after `file.delete.delay.ms`. A read planned before the deletion holds the `.log`
//! file's descriptor and completes from it.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use crate::config::LogConfig;
use crate::error::StorageError;
use crate::log::Log;
use crate::log_manager::LogManager;
use crate::scheduler::schedule_removal;
use crate::topic_partition::TopicPartition;

/// Why retention deletes a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionReason {
    /// Its newest record is older than `retention.ms`.
    RetentionMs,
    /// The log stays at or above `retention.bytes` without it.
    RetentionBytes,
    /// Every offset in it is below the log start offset.
    LogStartOffset,
}

/// A segment a retention pass deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeletableSegment {
    pub base_offset: i64,
    /// Bytes of its `.log` file.
    pub size: u64,
    pub reason: DeletionReason,
}

/// What one retention pass removed from one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentDeletion {
    pub segments: Vec<DeletableSegment>,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
    /// The renamed `*.deleted` files, to remove after `delay_ms`.
    pub files: Vec<PathBuf>,
    /// The log's `file.delete.delay.ms`.
    pub delay_ms: i64,
}

impl SegmentDeletion {
    /// Bytes of the deleted `.log` files.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }
}

/// Why DeleteRecords cannot move the log start offset (Kafka's `deleteRecordsOnLeader`).
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    #[error("records of a topic whose cleanup.policy lacks delete cannot be deleted")]
    PolicyViolation,
    #[error("offset {offset} is not between 0 and the high watermark {high_watermark}")]
    OffsetOutOfRange { offset: i64, high_watermark: i64 },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl DeleteRecordsError {
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            Self::PolicyViolation => ResponseError::PolicyViolation.code(),
            Self::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
            Self::Storage(error) => error.kafka_error_code(),
        }
    }
}

/// DeleteRecords' "up to the high watermark" offset.
pub const HIGH_WATERMARK: i64 = -1;

/// One segment as the planner sees it.
#[derive(Clone, Copy, Debug)]
struct SegmentSummary {
    base_offset: i64,
    size: u64,
    largest_timestamp: i64,
}

/// The offsets that bound what a pass may delete.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    log_start_offset: i64,
    high_watermark: i64,
    log_end_offset: i64,
}

/// The segments a pass deletes, oldest first, each predicate walked from where the previous
/// one stopped (Kafka's order: time, size, log start offset).
fn plan(
    segments: &[SegmentSummary],
    bounds: Bounds,
    config: &LogConfig,
    now_ms: i64,
) -> Vec<DeletableSegment> {
    let mut reasons = Vec::with_capacity(3);
    if config.cleanup_policy.delete {
        reasons.extend([DeletionReason::RetentionMs, DeletionReason::RetentionBytes]);
    }
    reasons.push(DeletionReason::LogStartOffset);
    let mut remaining_bytes: u64 = segments.iter().map(|s| s.size).sum();
    let mut planned = Vec::new();
    for reason in reasons {
        while let Some(segment) = segments.get(planned.len()) {
            let next = segments.get(planned.len() + 1);
            let upper_bound = next.map_or(bounds.log_end_offset, |n| n.base_offset);
            let last_and_empty = next.is_none() && segment.size == 0;
            let breached = match reason {
                DeletionReason::RetentionMs => {
                    config.retention_ms >= 0
                        && now_ms.saturating_sub(segment.largest_timestamp) > config.retention_ms
                }
                DeletionReason::RetentionBytes => u64::try_from(config.retention_bytes)
                    .is_ok_and(|budget| remaining_bytes - segment.size >= budget),
                DeletionReason::LogStartOffset => {
                    next.is_some_and(|n| n.base_offset <= bounds.log_start_offset)
                }
            };
            // Offsets at or above the high watermark stay, so the log start never passes it.
            if !breached || last_and_empty || bounds.high_watermark < upper_bound {
                break;
            }
            remaining_bytes -= segment.size;
            planned.push(DeletableSegment {
                base_offset: segment.base_offset,
                size: segment.size,
                reason,
            });
        }
    }
    planned
}

impl Log {
    /// The segments a retention pass at `now_ms` would delete, oldest first.
    pub fn deletable_segments(&self, now_ms: i64) -> Result<Vec<DeletableSegment>, StorageError> {
        if self.closed {
            return Ok(Vec::new());
        }
        let summaries = self
            .segments
            .values()
            .map(|segment| {
                Ok(SegmentSummary {
                    base_offset: segment.base_offset(),
                    size: segment.size(),
                    largest_timestamp: segment
                        .largest_timestamp()
                        .map_err(StorageError::io(segment.log_path()))?,
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        let bounds = Bounds {
            log_start_offset: self.log_start_offset,
            high_watermark: self.high_watermark(),
            log_end_offset: self.log_end_offset,
        };
        Ok(plan(&summaries, bounds, self.config(), now_ms))
    }

    /// One retention pass: removes the deletable segments from the log, renames their files
    /// (and their producer snapshots) `*.deleted` and advances the log start offset. `None`
    /// when nothing was deletable.
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
    ) -> Result<Option<SegmentDeletion>, StorageError> {
        let deletable = self.deletable_segments(now_ms)?;
        if deletable.is_empty() {
            return Ok(None);
        }
        if deletable.len() == self.segments.len() {
            // A log always keeps a segment: start the next one before the last goes.
            self.roll(now_ms).map_err(StorageError::io(self.dir()))?;
        }
        let mut files = Vec::new();
        for doomed in &deletable {
            if let Some(segment) = self.segments.remove(&doomed.base_offset) {
                files.extend(
                    segment
                        .rename_for_deletion()
                        .map_err(StorageError::io(self.dir()))?,
                );
            }
        }
        let first_base = *self
            .segments
            .keys()
            .next()
            .expect("a log always keeps a segment");
        self.advance_log_start_offset(first_base)?;
        files.extend(self.producer_state().rename_snapshots_below(first_base)?);
        Ok(Some(SegmentDeletion {
            segments: deletable,
            log_start_offset: self.log_start_offset,
            files,
            delay_ms: self.config().file_delete_delay_ms,
        }))
    }

    /// DeleteRecords: moves the log start offset up to `offset` (`HIGH_WATERMARK`: the high
    /// watermark) and returns the new log start offset (the low watermark). Reads below it
    /// fail at once; the next retention pass deletes the segments wholly below it.
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, DeleteRecordsError> {
        if self.closed {
            return Err(StorageError::LogClosed.into());
        }
        if !self.config().cleanup_policy.delete {
            return Err(DeleteRecordsError::PolicyViolation);
        }
        let high_watermark = self.high_watermark();
        let offset = if offset == HIGH_WATERMARK {
            high_watermark
        } else {
            offset
        };
        if offset < 0 || offset > high_watermark {
            return Err(DeleteRecordsError::OffsetOutOfRange {
                offset,
                high_watermark,
            });
        }
        self.advance_log_start_offset(offset)?;
        Ok(self.log_start_offset)
    }

    /// Kafka's maybeIncrementLogStartOffset for a snapshot that now stands in for the records
    /// below `offset`: moves the log start offset there if that is forward and not past the
    /// high watermark; true if it moved. The next retention pass deletes the segments below.
    pub fn maybe_increment_log_start_offset(&mut self, offset: i64) -> Result<bool, StorageError> {
        if self.closed {
            return Err(StorageError::LogClosed);
        }
        if offset <= self.log_start_offset || offset > self.high_watermark() {
            return Ok(false);
        }
        self.advance_log_start_offset(offset)?;
        Ok(true)
    }

    /// Raises the log start offset to `offset` (never lowers it); the leader-epoch cache
    /// forgets what lies below, and nothing below it needs recovery any more.
    fn advance_log_start_offset(&mut self, offset: i64) -> Result<(), StorageError> {
        if offset <= self.log_start_offset {
            return Ok(());
        }
        self.log_start_offset = offset;
        self.recovery_point.fetch_max(offset, Ordering::AcqRel);
        self.leader_epoch_cache.truncate_from_start(offset)
    }
}

impl LogManager {
    /// Kafka's `cleanupLogs`: one retention pass over every log (`Log::delete_old_segments`),
    /// each log locked only while its segments are unlinked from it and renamed. The renamed
    /// files are removed on the scheduler thread after the log's `file.delete.delay.ms`. When
    /// a log start offset moved, the checkpoints are written. A log whose pass failed is
    /// logged (its dir taken offline on an I/O error) and the others go on.
    pub fn cleanup_logs(
        &self,
        now_ms: i64,
    ) -> Result<Vec<(TopicPartition, SegmentDeletion)>, StorageError> {
        let mut deleted = Vec::new();
        for tp in self.all_partitions() {
            if let Some(deletion) = self.delete_old_segments_of(&tp, now_ms) {
                deleted.push((tp, deletion));
            }
        }
        if !deleted.is_empty() {
            self.checkpoint()?;
        }
        Ok(deleted)
    }

    /// One log's retention pass; its renamed files are removed after the log's delay. A
    /// failure is logged (the dir taken offline on an I/O error) and gives `None`.
    pub fn delete_old_segments_of(
        &self,
        tp: &TopicPartition,
        now_ms: i64,
    ) -> Option<SegmentDeletion> {
        let log = self.get(tp)?;
        let outcome = log.lock().delete_old_segments(now_ms);
        match outcome {
            Ok(Some(deletion)) => {
                info!(
                    partition = %tp,
                    segments = ?deletion.segments,
                    log_start_offset = deletion.log_start_offset,
                    "deleted old segments"
                );
                self.schedule_file_removal(deletion.files.clone(), deletion.delay_ms);
                Some(deletion)
            }
            Ok(None) => None,
            Err(error) => {
                warn!(partition = %tp, %error, "retention failed");
                if let StorageError::Io { source, .. } = &error {
                    let dir = log.lock().dir().to_path_buf();
                    if let Some(log_dir) = dir.parent() {
                        self.failure_channel()
                            .maybe_add_offline_log_dir(log_dir, source);
                    }
                }
                None
            }
        }
    }

    /// Removes `*.deleted` files once `delay_ms` has passed. Files left when the broker stops
    /// first are removed at the next start.
    pub fn schedule_file_removal(&self, files: Vec<PathBuf>, delay_ms: i64) {
        schedule_removal(&self.scheduler, files, delay_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn segment(base_offset: i64, size: u64, largest_timestamp: i64) -> SegmentSummary {
        SegmentSummary {
            base_offset,
            size,
            largest_timestamp,
        }
    }

    fn bounds(log_start_offset: i64, high_watermark: i64, log_end_offset: i64) -> Bounds {
        Bounds {
            log_start_offset,
            high_watermark,
            log_end_offset,
        }
    }

    fn config(retention_ms: i64, retention_bytes: i64) -> LogConfig {
        LogConfig {
            retention_ms,
            retention_bytes,
            ..LogConfig::default()
        }
    }

    fn planned(plan: &[DeletableSegment]) -> Vec<(i64, DeletionReason)> {
        plan.iter().map(|d| (d.base_offset, d.reason)).collect()
    }

    #[test]
    fn time_retention_deletes_the_expired_prefix_and_nothing_newer() {
        let segments = [
            segment(0, 100, NOW - 5_000),
            segment(10, 100, NOW - 4_000),
            segment(20, 100, NOW - 500),
            segment(30, 100, NOW - 6_000),
            segment(40, 100, NOW - 100),
        ];
        let plan = plan(&segments, bounds(0, 50, 50), &config(1_000, -1), NOW);
        // Segment 30 is older but follows a retained one: Kafka stops at the first keeper.
        assert_eq!(
            planned(&plan),
            vec![
                (0, DeletionReason::RetentionMs),
                (10, DeletionReason::RetentionMs)
            ]
        );
        assert!(super::plan(&segments, bounds(0, 50, 50), &config(-1, -1), NOW).is_empty());
    }

    #[test]
    fn an_expired_active_segment_goes_once_fully_replicated_but_an_empty_one_stays() {
        let old = NOW - 10_000;
        let segments = [segment(0, 100, old), segment(10, 100, old)];
        let all = plan(&segments, bounds(0, 20, 20), &config(1_000, -1), NOW);
        assert_eq!(all.len(), 2);
        let held_back = plan(&segments, bounds(0, 15, 20), &config(1_000, -1), NOW);
        assert_eq!(planned(&held_back), vec![(0, DeletionReason::RetentionMs)]);
        let empty_active = [segment(0, 100, old), segment(10, 0, -1)];
        let plan = plan(&empty_active, bounds(0, 10, 10), &config(1_000, -1), NOW);
        assert_eq!(planned(&plan), vec![(0, DeletionReason::RetentionMs)]);
    }

    #[test]
    fn size_retention_keeps_the_newest_segments_within_the_budget() {
        let segments = [
            segment(0, 300, NOW),
            segment(10, 300, NOW),
            segment(20, 300, NOW),
            segment(30, 100, NOW),
        ];
        // 1000 bytes, budget 500: dropping 0 leaves 700 >= 500, dropping 10 leaves 400 < 500.
        let plan = plan(&segments, bounds(0, 40, 40), &config(-1, 500), NOW);
        assert_eq!(planned(&plan), vec![(0, DeletionReason::RetentionBytes)]);
        let plan = super::plan(&segments, bounds(0, 40, 40), &config(-1, 400), NOW);
        assert_eq!(plan.len(), 2);
    }

    #[test]
    fn segments_below_the_log_start_offset_go_whatever_the_policy() {
        let segments = [
            segment(0, 100, NOW),
            segment(10, 100, NOW),
            segment(20, 100, NOW),
        ];
        let mut compact = config(-1, -1);
        compact.cleanup_policy.delete = false;
        compact.cleanup_policy.compact = true;
        // The segment holding the log start offset (10 <= 15 < 20) stays.
        let plan = plan(&segments, bounds(15, 30, 30), &compact, NOW);
        assert_eq!(planned(&plan), vec![(0, DeletionReason::LogStartOffset)]);
        let expired = config(1, -1);
        let mut compact_expired = expired.clone();
        compact_expired.cleanup_policy.delete = false;
        let old = [segment(0, 100, 0), segment(10, 100, 0)];
        assert!(super::plan(&old, bounds(0, 20, 20), &compact_expired, NOW).is_empty());
        assert_eq!(super::plan(&old, bounds(0, 20, 20), &expired, NOW).len(), 2);
    }

    #[test]
    fn delete_records_errors_are_kafkas() {
        assert_eq!(DeleteRecordsError::PolicyViolation.kafka_error_code(), 44);
        let out_of_range = DeleteRecordsError::OffsetOutOfRange {
            offset: 9,
            high_watermark: 3,
        };
        assert_eq!(out_of_range.kafka_error_code(), 1);
    }
}
