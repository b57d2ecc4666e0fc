//! Kafka's `Cleaner`: one clean of one log. The offset map is built over the dirty section,
//! then every segment below the map's end is rewritten, in groups no larger than a segment,
//! keeping what `filter` keeps. Segment files are read and written without the log's lock,
//! which is taken only to swap a rewritten group in (`swap`).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use thiserror::Error;

use crate::batch::NO_TIMESTAMP;
use crate::cleaner::filter::{filter_batch, is_aborted, put_keys, FilterContext, Filtered};
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::swap::replace_segments;
use crate::config::LogConfig;
use crate::error::BatchError;
use crate::file_records::{read_at, BatchScanner};
use crate::log::Log;
use crate::log::SharedLog;
use crate::log_file_utils::CLEANED_FILE_SUFFIX;
use crate::segment::{AppendedBatch, LogSegment};
use crate::topic_partition::TopicPartition;
use crate::txn_index::AbortedTxnEntry;

/// Why a clean stopped; the log is left as it was (a rewritten group is swapped in whole or
/// not at all).
#[derive(Debug, Error)]
pub enum CleanError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("a stored batch cannot be cleaned: {0}")]
    Batch(#[from] BatchError),
    #[error("log.cleaner.dedupe.buffer.size holds fewer keys than the first dirty batch has")]
    DedupeBufferTooSmall,
    #[error("the log changed or closed while it was cleaned")]
    LogChanged,
    #[error("the cleaner is shutting down")]
    Aborted,
}

/// An inactive segment as the cleaner reads it: its file stays readable even if the log
/// drops the segment meanwhile.
#[derive(Clone)]
pub(crate) struct SegmentRef {
    pub base_offset: i64,
    pub file: Arc<File>,
    pub size: u64,
    /// The offset after the segment (the next segment's base).
    pub end_offset: i64,
    largest_timestamp: i64,
}

/// A compacted log's state taken under its lock (Kafka's `LogToClean`).
pub(crate) struct LogToClean {
    pub topic_partition: TopicPartition,
    pub dir: PathBuf,
    pub config: LogConfig,
    /// Every segment below the first uncleanable offset, oldest first.
    pub segments: Vec<SegmentRef>,
    pub first_dirty_offset: i64,
    last_offset_of_producer: HashMap<i64, i64>,
    /// Every aborted transaction the log's `.txnindex` files hold (KIP-98).
    aborted_txns: Vec<AbortedTxnEntry>,
}

impl LogToClean {
    /// Takes the cleaner's view of `log`; `checkpoint` is its last cleaned offset, if any.
    pub(crate) fn take(log: &Log, checkpoint: Option<i64>, now_ms: i64) -> Self {
        let log_start = log.log_start_offset();
        let first_dirty_offset = checkpoint
            .filter(|offset| (log_start..=log.log_end_offset()).contains(offset))
            .unwrap_or(log_start);
        let config = log.config().clone();
        let active_base = log.segments.keys().next_back().copied().unwrap_or(0);
        let mut first_uncleanable_offset = active_base;
        // Records the high watermark does not cover yet are never cleaned.
        if let Some((base, _)) = log.segments.range(..=log.last_stable_offset()).next_back() {
            first_uncleanable_offset = first_uncleanable_offset.min(*base);
        }
        let bases: Vec<i64> = log.segments.keys().copied().collect();
        let mut segments = Vec::new();
        for (i, (base, segment)) in log.segments.iter().enumerate() {
            if *base >= first_uncleanable_offset {
                break;
            }
            let largest_timestamp = largest_timestamp(segment);
            // min.compaction.lag.ms: the first dirty segment holding a younger record, and
            // everything after it, stays dirty.
            let too_young = config.min_compaction_lag_ms > 0
                && bases[i + 1] > first_dirty_offset
                && largest_timestamp > now_ms.saturating_sub(config.min_compaction_lag_ms);
            if too_young {
                first_uncleanable_offset = *base;
                break;
            }
            segments.push(SegmentRef {
                base_offset: *base,
                file: Arc::clone(segment.log_file()),
                size: segment.size(),
                end_offset: bases[i + 1],
                largest_timestamp,
            });
        }
        let last_offset_of_producer = log
            .producer_state()
            .producers()
            .iter()
            .filter_map(|(id, entry)| entry.batches.back().map(|b| (*id, b.last_offset)))
            .collect();
        Self {
            topic_partition: log.topic_partition().clone(),
            dir: log.dir().to_path_buf(),
            config,
            segments,
            first_dirty_offset: first_dirty_offset.min(first_uncleanable_offset.max(log_start)),
            last_offset_of_producer,
            aborted_txns: log
                .segments
                .values()
                .flat_map(|segment| segment.txn_index.entries().iter().copied())
                .collect(),
        }
    }

    /// Bytes of the segments wholly below the first dirty offset.
    pub(crate) fn clean_bytes(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.end_offset <= self.first_dirty_offset)
            .map(|s| s.size)
            .sum()
    }

    /// Bytes of the segments between the first dirty and the first uncleanable offset.
    pub(crate) fn cleanable_bytes(&self) -> u64 {
        self.dirty_segments().map(|s| s.size).sum()
    }

    fn dirty_segments(&self) -> impl Iterator<Item = &SegmentRef> {
        self.segments
            .iter()
            .filter(|s| s.end_offset > self.first_dirty_offset)
    }

    /// Kafka's cleanable ratio: dirty bytes over all cleanable-range bytes.
    pub(crate) fn dirty_ratio(&self) -> f64 {
        let dirty = self.cleanable_bytes();
        let total = dirty + self.clean_bytes();
        if total == 0 {
            0.0
        } else {
            dirty as f64 / total as f64
        }
    }

    /// `max.compaction.lag.ms`: the oldest dirty record waited too long.
    pub(crate) fn compaction_overdue(&self, now_ms: i64) -> bool {
        let Some(first) = self.dirty_segments().next() else {
            return false;
        };
        first_batch_timestamp(first)
            .is_some_and(|t| t >= 0 && now_ms.saturating_sub(t) > self.config.max_compaction_lag_ms)
    }
}

fn largest_timestamp(segment: &LogSegment) -> i64 {
    let recorded = segment.max_timestamp_so_far();
    if recorded != NO_TIMESTAMP {
        return recorded;
    }
    // Kafka falls back to the file's modification time.
    segment
        .log_file()
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(NO_TIMESTAMP, |d| d.as_millis() as i64)
}

fn first_batch_timestamp(segment: &SegmentRef) -> Option<i64> {
    let mut scanner = BatchScanner::new(&segment.file, 0, segment.size);
    match scanner.next_header() {
        Ok(Some((_, header))) => Some(header.max_timestamp),
        _ => Some(segment.largest_timestamp),
    }
}

/// What a finished clean did (Kafka's `CleanerStats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanStats {
    pub topic_partition: Option<TopicPartition>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_retained: u64,
    /// Segments rewritten, and the segments they became.
    pub segments_read: usize,
    pub segments_written: usize,
    pub elapsed: Duration,
}

/// The outcome of a clean: where the dirty section now starts, and when its oldest kept
/// tombstone may go.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cleaned {
    pub first_dirty_offset: i64,
    pub tombstone_horizon: Option<i64>,
    pub stats: CleanStats,
}

/// How often a throttled cleaner checks whether it must stop.
const THROTTLE_POLL: Duration = Duration::from_millis(100);

/// Paces the cleaner's reads and writes to `log.cleaner.io.max.bytes.per.second`.
pub(crate) struct Throttler<'a> {
    bytes_per_second: f64,
    started: Instant,
    bytes: u64,
    abort: &'a AtomicBool,
}

impl<'a> Throttler<'a> {
    pub(crate) fn new(bytes_per_second: f64, abort: &'a AtomicBool) -> Self {
        Self {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
            abort,
        }
    }

    /// Counts `bytes` of I/O, sleeping while the rate is above the limit; fails once the
    /// cleaner is asked to stop.
    fn account(&mut self, bytes: u64) -> Result<(), CleanError> {
        self.bytes += bytes;
        loop {
            if self.abort.load(Ordering::Acquire) {
                return Err(CleanError::Aborted);
            }
            // A rate of 0 never lets the I/O through, as Kafka's throttler would.
            let due = Duration::try_from_secs_f64(self.bytes as f64 / self.bytes_per_second)
                .unwrap_or(Duration::MAX);
            let Some(wait) = due.checked_sub(self.started.elapsed()) else {
                return Ok(());
            };
            std::thread::sleep(wait.min(THROTTLE_POLL));
        }
    }
}

/// Cleans `log` from the view `to_clean` took of it.
pub(crate) fn clean_log(
    log: &SharedLog,
    to_clean: &LogToClean,
    map: &mut OffsetMap,
    throttler: &mut Throttler<'_>,
    now_ms: i64,
) -> Result<Cleaned, CleanError> {
    let started = Instant::now();
    let mut stats = CleanStats {
        topic_partition: Some(to_clean.topic_partition.clone()),
        ..CleanStats::default()
    };
    let end_offset = build_offset_map(to_clean, map, throttler, &mut stats)?;
    let context = FilterContext {
        map,
        now_ms,
        config: &to_clean.config,
        last_offset_of_producer: &to_clean.last_offset_of_producer,
        aborted_txns: &to_clean.aborted_txns,
    };
    let to_rewrite: Vec<&SegmentRef> = to_clean
        .segments
        .iter()
        .filter(|s| s.base_offset < end_offset)
        .collect();
    let mut tombstone_horizon = None;
    for group in group_segments(&to_rewrite, &to_clean.config) {
        let (cleaned, horizon) =
            write_cleaned_group(to_clean, &group, &context, throttler, &mut stats)?;
        tombstone_horizon = tombstone_horizon.max(horizon);
        let old: Vec<(i64, Arc<File>)> = group
            .iter()
            .map(|s| (s.base_offset, Arc::clone(&s.file)))
            .collect();
        let swapped =
            replace_segments(&mut log.lock(), &old, cleaned).map_err(io_error(&to_clean.dir))?;
        if !swapped {
            return Err(CleanError::LogChanged);
        }
        stats.segments_read += group.len();
        stats.segments_written += 1;
    }
    stats.elapsed = started.elapsed();
    Ok(Cleaned {
        first_dirty_offset: end_offset,
        tombstone_horizon,
        stats,
    })
}

fn io_error(path: &std::path::Path) -> impl Fn(io::Error) -> CleanError + '_ {
    move |source| CleanError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Puts the latest offset of every key of the dirty section into `map`, stopping before a
/// batch whose keys might not fit; returns the offset after the last batch taken in.
fn build_offset_map(
    to_clean: &LogToClean,
    map: &mut OffsetMap,
    throttler: &mut Throttler<'_>,
    stats: &mut CleanStats,
) -> Result<i64, CleanError> {
    let mut end_offset = to_clean.first_dirty_offset;
    for segment in to_clean.dirty_segments() {
        let mut scanner = BatchScanner::new(&segment.file, 0, segment.size);
        let io = io_error(&to_clean.dir);
        while let Some((position, header)) = scanner.next_header().map_err(&io)? {
            if header.last_offset() < to_clean.first_dirty_offset {
                continue;
            }
            if !map.has_room_for(usize::try_from(header.records_count).unwrap_or(0)) {
                return if end_offset == to_clean.first_dirty_offset {
                    Err(CleanError::DedupeBufferTooSmall)
                } else {
                    Ok(end_offset)
                };
            }
            let bytes = read_at(&segment.file, position, header.size_in_bytes()).map_err(&io)?;
            throttler.account(bytes.len() as u64)?;
            stats.bytes_read += bytes.len() as u64;
            // An aborted record must never displace a committed one of its key.
            if !header.is_control() && !is_aborted(&to_clean.aborted_txns, &header) {
                put_keys(&bytes, &header, map)?;
            }
            end_offset = header.last_offset() + 1;
        }
        end_offset = end_offset.max(segment.end_offset);
    }
    Ok(end_offset)
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose sizes add up to at most a segment
/// and whose offsets fit one segment's 32-bit relative offsets.
fn group_segments<'a>(segments: &[&'a SegmentRef], config: &LogConfig) -> Vec<Vec<&'a SegmentRef>> {
    let max_bytes = config.segment_bytes();
    let mut groups: Vec<Vec<&SegmentRef>> = Vec::new();
    for segment in segments {
        let fits = groups.last().is_some_and(|group| {
            let size: u64 = group.iter().map(|s| s.size).sum();
            size + segment.size <= max_bytes
                && segment.end_offset - 1 - group[0].base_offset <= i64::from(i32::MAX)
        });
        match groups.last_mut() {
            Some(group) if fits => group.push(segment),
            _ => groups.push(vec![segment]),
        }
    }
    groups
}

/// Writes one group's kept batches to a `.cleaned` segment named after the group's first
/// segment, fsynced; returns it with the latest delete horizon of the tombstones it keeps.
fn write_cleaned_group(
    to_clean: &LogToClean,
    group: &[&SegmentRef],
    context: &FilterContext<'_>,
    throttler: &mut Throttler<'_>,
    stats: &mut CleanStats,
) -> Result<(LogSegment, Option<i64>), CleanError> {
    let io = io_error(&to_clean.dir);
    let mut cleaned = LogSegment::create_suffixed(
        &to_clean.dir,
        group[0].base_offset,
        &to_clean.config,
        CLEANED_FILE_SUFFIX,
        context.now_ms,
    )
    .map_err(&io)?;
    let written =
        fill_cleaned(&mut cleaned, group, context, throttler, stats).and_then(|horizon| {
            keep_aborted_txns(&mut cleaned, group, &to_clean.aborted_txns).map_err(&io)?;
            Ok(horizon)
        });
    let finished = written.and_then(|horizon| {
        cleaned.on_become_inactive().map_err(&io)?;
        cleaned.log_handle().sync_all().map_err(&io)?;
        for path in cleaned.index_paths() {
            File::open(&path).and_then(|f| f.sync_all()).map_err(&io)?;
        }
        Ok(horizon)
    });
    match finished {
        Ok(horizon) => Ok((cleaned, horizon)),
        Err(error) => {
            let _ = cleaned.delete_files();
            Err(error)
        }
    }
}

/// The cleaned segment keeps the index entries of the markers it keeps (every marker: the
/// cleaner never removes one), so aborted records left in the log stay hidden from
/// read_committed consumers.
fn keep_aborted_txns(
    cleaned: &mut LogSegment,
    group: &[&SegmentRef],
    aborted_txns: &[AbortedTxnEntry],
) -> io::Result<()> {
    let start = group[0].base_offset;
    let end = group[group.len() - 1].end_offset;
    for entry in aborted_txns
        .iter()
        .filter(|e| (start..end).contains(&e.last_offset))
    {
        cleaned.txn_index.append(*entry)?;
    }
    Ok(())
}

fn fill_cleaned(
    cleaned: &mut LogSegment,
    group: &[&SegmentRef],
    context: &FilterContext<'_>,
    throttler: &mut Throttler<'_>,
    stats: &mut CleanStats,
) -> Result<Option<i64>, CleanError> {
    let path = cleaned.log_path().to_path_buf();
    let io = |source| CleanError::Io {
        path: path.clone(),
        source,
    };
    let mut horizon = None;
    for segment in group {
        let mut scanner = BatchScanner::new(&segment.file, 0, segment.size);
        while let Some((position, header)) = scanner.next_header().map_err(io)? {
            let bytes = read_at(&segment.file, position, header.size_in_bytes()).map_err(io)?;
            throttler.account(bytes.len() as u64)?;
            stats.bytes_read += bytes.len() as u64;
            let result = filter_batch(&bytes, &header, context)?;
            stats.records_read += result.records_read as u64;
            stats.records_retained += result.records_retained as u64;
            horizon = horizon.max(result.tombstone_horizon);
            let kept = match &result.filtered {
                Filtered::Keep => &bytes,
                Filtered::Rewrite(rewritten) => rewritten,
                Filtered::Drop => continue,
            };
            let kept_header = crate::batch::check_integrity(kept)?;
            let appended = AppendedBatch {
                last_offset: kept_header.last_offset(),
                max_timestamp: kept_header.max_timestamp,
                size: kept.len() as u64,
            };
            cleaned.append(kept, &[appended]).map_err(io)?;
            throttler.account(kept.len() as u64)?;
            stats.bytes_written += kept.len() as u64;
        }
    }
    Ok(horizon)
}
