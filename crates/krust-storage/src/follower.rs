//! A follower's side of a log (Kafka's `UnifiedLog.appendAsFollower`, `truncateTo` and
//! `truncateFullyAndStartAt`): batches copied from the leader keep the leader's offsets,
//! leader epochs and timestamps, and a suffix that diverged from the leader is cut off.

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::batch::{self, BatchHeader, NO_TIMESTAMP};
use crate::control_batch::{read_end_txn_marker, EndTxnMarker};
use crate::error::{AppendError, BatchError, StorageError};
use crate::log::{wall_clock_ms, Log, LogAppendInfo};
use crate::producer_state::ProducerStateManager;
use crate::recovery;
use crate::segment::{AppendedBatch, IncomingAppend, LogSegment};

/// One replicated batch that passed the follower's checks.
struct ReplicatedBatch {
    range: Range<usize>,
    header: BatchHeader,
}

/// Kafka's checks of a fetched record set (`analyzeAndValidateRecords` for replication):
/// whole v2 batches with valid CRCs and offsets that only grow, from `log_end_offset` on.
/// Record contents are not re-checked: the leader validated them, and a compacted batch may
/// hold fewer records than its offset range.
fn validate_replicated(
    records: &[u8],
    log_end_offset: i64,
) -> Result<Vec<ReplicatedBatch>, AppendError> {
    let mut previous_last = log_end_offset - 1;
    let mut batches = Vec::new();
    for range in batch::split_batches(records)? {
        let header = batch::check_integrity(&records[range.clone()])?;
        if header.last_offset_delta < 0 || header.records_count < 0 {
            return Err(invalid("a replicated batch has a negative offset delta or count").into());
        }
        if header.base_offset <= previous_last {
            if batches.is_empty() {
                return Err(AppendError::UnexpectedAppendOffset {
                    first_offset: header.base_offset,
                    log_end_offset,
                });
            }
            return Err(invalid("replicated batches are out of offset order").into());
        }
        previous_last = header.last_offset();
        batches.push(ReplicatedBatch { range, header });
    }
    Ok(batches)
}

/// The marker of a replicated control batch; one that is not a marker is logged and its
/// batch applied as a plain control batch (the leader accepted it).
fn replicated_marker(bytes: &[u8], header: &BatchHeader) -> Option<EndTxnMarker> {
    if !header.is_control() || !header.has_producer_id() {
        return None;
    }
    read_end_txn_marker(bytes, header).unwrap_or_else(|error| {
        tracing::warn!(offset = header.base_offset, %error, "a replicated control batch is not a transaction marker");
        None
    })
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidRecord(reason.to_string())
}

impl Log {
    /// Appends batches fetched from the leader as they are (KIP-101: their leader epochs
    /// feed this log's leader-epoch cache). The first batch must start at or after the log
    /// end offset; gaps (a compacted leader) are kept. An empty record set appends nothing.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<LogAppendInfo, AppendError> {
        if self.closed {
            return Err(AppendError::LogClosed);
        }
        let batches = if records.is_empty() {
            Vec::new()
        } else {
            validate_replicated(records, self.log_end_offset)?
        };
        let first_offset = batches
            .first()
            .map_or(self.log_end_offset, |b| b.header.base_offset);
        let mut run: Vec<&ReplicatedBatch> = Vec::new();
        for replicated in &batches {
            // An empty segment never rolls, so the roll check needs the run written first.
            if !run.is_empty() && self.active_segment().is_empty() {
                self.write_replicated_run(records, &run)?;
                run.clear();
            }
            let incoming = incoming_with(&run, replicated);
            if self
                .active_segment()
                .should_roll(self.config(), &incoming, now_ms)
            {
                self.write_replicated_run(records, &run)?;
                run.clear();
                let alone = incoming_with(&run, replicated);
                if self
                    .active_segment()
                    .should_roll(self.config(), &alone, now_ms)
                {
                    self.roll(now_ms)?;
                }
            }
            run.push(replicated);
        }
        self.write_replicated_run(records, &run)?;
        self.maybe_flush_after_append()?;
        let headers = batches.iter().map(|b| &b.header);
        Ok(LogAppendInfo {
            first_offset,
            last_offset: self.log_end_offset - 1,
            max_timestamp: headers
                .clone()
                .map(|h| h.max_timestamp)
                .max()
                .unwrap_or(NO_TIMESTAMP),
            log_append_time: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset,
            record_count: headers.map(|h| i64::from(h.records_count)).sum(),
            duplicate: false,
        })
    }

    /// Writes consecutive replicated batches to the active segment and applies them to the
    /// log end offset, the producer state and the leader-epoch cache.
    fn write_replicated_run(
        &mut self,
        records: &[u8],
        run: &[&ReplicatedBatch],
    ) -> Result<(), AppendError> {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return Ok(());
        };
        let appended: Vec<AppendedBatch> = run
            .iter()
            .map(|b| AppendedBatch {
                last_offset: b.header.last_offset(),
                max_timestamp: b.header.max_timestamp,
                size: b.range.len() as u64,
            })
            .collect();
        self.active_segment_mut()
            .append(&records[first.range.start..last.range.end], &appended)?;
        for replicated in run {
            let header = &replicated.header;
            let marker = replicated_marker(&records[replicated.range.clone()], header);
            if let Some((txn, last_stable_offset)) = self.producer_state.replay(header, marker) {
                self.active_segment_mut()
                    .append_aborted_txn(&txn, last_stable_offset)?;
            }
            self.unflushed_messages += i64::from(header.records_count);
            self.leader_epoch_cache
                .assign(header.partition_leader_epoch, header.base_offset)
                .map_err(|e| AppendError::Storage(std::io::Error::other(e.to_string())))?;
        }
        self.log_end_offset = last.header.last_offset() + 1;
        Ok(())
    }

    /// Kafka's `truncateTo`: removes every offset >= `offset` (a batch straddling it goes
    /// whole, so the log end may land below `offset`), with the segments, index entries,
    /// leader epochs (fsynced) and producer state that described them; the high watermark
    /// and recovery point come down with the log end. False when `offset` is at or past the
    /// log end (nothing to remove).
    pub fn truncate_to(&mut self, offset: i64) -> Result<bool, StorageError> {
        if self.closed {
            return Err(StorageError::LogClosed);
        }
        if offset >= self.log_end_offset {
            return Ok(false);
        }
        let first_base = *self.segments.keys().next().expect("a log has a segment");
        if offset < first_base {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(true);
        }
        let dir = self.dir().to_path_buf();
        let io = |e: std::io::Error| StorageError::io(&dir)(e);
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(b, _)| *b).collect();
        for base in doomed {
            if let Some(segment) = self.segments.remove(&base) {
                segment.delete_files().map_err(io)?;
            }
        }
        let config = self.config().clone();
        let active = self.active_segment_mut();
        active.truncate_to(offset).map_err(io)?;
        active.prepare_for_appends(&config).map_err(io)?;
        self.log_end_offset = active.next_offset().map_err(io)?;
        self.leader_epoch_cache
            .truncate_from_end(self.log_end_offset)?;
        self.log_start_offset = self.log_start_offset.min(self.log_end_offset);
        let mut producer_state =
            ProducerStateManager::load(&dir, self.log_start_offset, self.log_end_offset)?;
        let end = self.log_end_offset;
        recovery::replay_producer_state(&mut producer_state, &mut self.segments, end, None)
            .map_err(io)?;
        self.producer_state = producer_state;
        self.clamp_to_log_end();
        Ok(true)
    }

    /// Kafka's `truncateFullyAndStartAt`: deletes every segment, leader epoch and producer
    /// snapshot; the log is empty and starts at `offset` (a follower whose fetch offset the
    /// leader no longer has).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        if self.closed {
            return Err(StorageError::LogClosed);
        }
        let dir = self.dir().to_path_buf();
        let io = |e: std::io::Error| StorageError::io(&dir)(e);
        for (_, segment) in std::mem::take(&mut self.segments) {
            segment.delete_files().map_err(io)?;
        }
        let segment =
            LogSegment::create(&dir, offset, self.config(), wall_clock_ms()).map_err(io)?;
        self.segments.insert(offset, segment);
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.leader_epoch_cache.clear_and_flush()?;
        self.producer_state.truncate_fully_and_start_at(offset)?;
        self.unflushed_messages = 0;
        self.high_watermark = offset;
        self.clamp_to_log_end();
        Ok(())
    }

    /// After a truncation nothing may claim offsets past the new log end.
    fn clamp_to_log_end(&mut self) {
        let end = self.log_end_offset;
        self.high_watermark = self.high_watermark.min(end);
        self.producer_state
            .on_high_watermark_updated(self.high_watermark);
        self.recovery_point.fetch_min(end, Ordering::AcqRel);
    }
}

/// The roll decision's view of `run` plus `next`.
fn incoming_with(run: &[&ReplicatedBatch], next: &ReplicatedBatch) -> IncomingAppend {
    let batches = || run.iter().copied().chain(std::iter::once(next));
    IncomingAppend {
        size: batches().map(|b| b.range.len() as u64).sum(),
        max_timestamp: batches()
            .map(|b| b.header.max_timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP),
        last_offset: next.header.last_offset(),
    }
}
