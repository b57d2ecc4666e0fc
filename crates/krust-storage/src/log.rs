//! `Log`: one partition's log — an ordered set of segments, the offsets that bound it, its
//! producer state and leader-epoch cache. Appends go to the last (active) segment.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::append_origin::AppendOrigin;
use crate::batch::{self, NO_TIMESTAMP};
use crate::config::{LogConfig, TimestampType};
use crate::control_batch::read_end_txn_marker;
use crate::error::{AppendError, StorageError};
use crate::leader_epoch::LeaderEpochFileCache;
use crate::partition_metadata::PartitionMetadataFile;
use crate::producer_state::{BatchMetadata, ProducerAppend, ProducerStateManager};
use crate::recompress;
pub use crate::recovery::LoadParams;
use crate::recovery::{self, LoadedSegments, RecoveryStats};
use crate::scheduler::Scheduler;
use crate::segment::{AppendedBatch, IncomingAppend, LogSegment};
use crate::topic_partition::TopicPartition;
use crate::validate::{validate_records, Target};
use parking_lot::Mutex;
use tracing::warn;

/// The outcome of an append, as the Produce response needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The largest timestamp stored for the appended batches.
    pub max_timestamp: i64,
    /// The broker time stamped on the batches for LogAppendTime topics, else -1.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// Records appended (0 for a duplicate).
    pub record_count: i64,
    /// An idempotent retry of an already written batch: nothing was written and the offsets
    /// are the original ones.
    pub duplicate: bool,
}

/// Files to fsync for a flush, taken under the lock and run outside it.
pub struct FlushTask {
    log_files: Vec<Arc<File>>,
    /// Index files (mapped, no descriptor kept), the leader-epoch checkpoint and
    /// `partition.metadata`: written without fsync, made durable here.
    paths: Vec<PathBuf>,
    dir: PathBuf,
    up_to: i64,
    unflushed_messages: i64,
}

impl FlushTask {
    /// fsyncs the segment files and the partition directory.
    pub fn run(&self) -> io::Result<()> {
        for file in &self.log_files {
            file.sync_all()?;
        }
        for path in &self.paths {
            // fsync through any descriptor writes back the pages dirtied through the mapping.
            // A segment deleted since the task was taken has nothing left to make durable.
            match File::open(path) {
                Ok(file) => file.sync_all()?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        File::open(&self.dir)?.sync_all()
    }

    /// The offset below which the log is durable once `run` succeeded.
    pub fn up_to(&self) -> i64 {
        self.up_to
    }
}

/// A partition's log, shared between request handlers.
pub type SharedLog = Arc<Mutex<Log>>;

pub struct Log {
    dir: PathBuf,
    topic_partition: TopicPartition,
    topic_id: Option<[u8; 16]>,
    config: LogConfig,
    pub(crate) segments: BTreeMap<i64, LogSegment>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    /// Offsets below it are replicated to the whole ISR: what consumers may read.
    pub(crate) high_watermark: i64,
    /// Advanced by flushes, including those the scheduler runs after a roll.
    pub(crate) recovery_point: Arc<AtomicI64>,
    /// Runs the flush of rolled segments; without one (a standalone log) they wait for the
    /// next full flush.
    pub(crate) scheduler: Option<Arc<Scheduler>>,
    /// What loading the log had to re-validate.
    recovered: RecoveryStats,
    pub(crate) producer_state: ProducerStateManager,
    pub(crate) leader_epoch_cache: LeaderEpochFileCache,
    pub(crate) unflushed_messages: i64,
    last_flush_ms: i64,
    pub(crate) closed: bool,
}

pub(crate) fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Log {
    /// Opens (or creates) the log in `dir`, recovering it if the last stop was unclean.
    ///
    /// With a `topic_id`, `partition.metadata` is written if absent and must match if present.
    pub fn open(
        dir: &Path,
        topic_partition: TopicPartition,
        topic_id: Option<[u8; 16]>,
        config: LogConfig,
        params: LoadParams,
        now_ms: i64,
    ) -> Result<Self, StorageError> {
        config.validate()?;
        // A directory this call makes holds nothing to load or reconcile: a new partition
        // skips the scans (a topic of thousands of partitions is created in one go).
        let fresh = make_partition_dir(dir)?;
        let topic_id = reconcile_topic_id(dir, topic_id, fresh)?;
        let loaded = if fresh {
            LoadedSegments::new_log(dir, params.log_start_offset.max(0), &config, now_ms)?
        } else {
            recovery::load_segments(dir, &config, &params, now_ms)?
        };
        let log_end_offset = loaded.log_end_offset;
        let first_base = loaded.segments.keys().next().copied().unwrap_or(0);
        let log_start_offset = params.log_start_offset.max(first_base).min(log_end_offset);
        let mut leader_epoch_cache = if fresh {
            LeaderEpochFileCache::empty(dir)
        } else {
            LeaderEpochFileCache::load(dir)?
        };
        leader_epoch_cache.truncate_from_end(log_end_offset)?;
        for entry in &loaded.recovered_epochs {
            leader_epoch_cache.assign(entry.epoch, entry.start_offset)?;
        }
        let mut segments = loaded.segments;
        let rebuild_from = loaded.txn_index_rebuild_from;
        let mut producer_state = if fresh {
            ProducerStateManager::empty(dir, log_start_offset)
        } else {
            let replay_from = rebuild_from.unwrap_or(log_end_offset);
            ProducerStateManager::load_at_or_below(
                dir,
                log_start_offset,
                log_end_offset,
                replay_from,
            )?
        };
        recovery::replay_producer_state(
            &mut producer_state,
            &mut segments,
            log_end_offset,
            rebuild_from,
        )
        .map_err(StorageError::io(dir))?;
        if params.high_watermark > log_end_offset {
            warn!(
                partition = %topic_partition,
                checkpointed = params.high_watermark,
                log_end_offset,
                "the checkpointed high watermark is past the log end; using the log end"
            );
        }
        let high_watermark = params
            .high_watermark
            .clamp(log_start_offset, log_end_offset);
        producer_state.on_high_watermark_updated(high_watermark);
        let recovery_point = if params.had_clean_shutdown {
            log_end_offset
        } else {
            params
                .recovery_point
                .clamp(log_start_offset, log_end_offset)
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            topic_partition,
            topic_id,
            config,
            segments,
            log_start_offset,
            log_end_offset,
            high_watermark,
            recovery_point: Arc::new(AtomicI64::new(recovery_point)),
            scheduler: None,
            recovered: loaded.recovered,
            producer_state,
            leader_epoch_cache,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            closed: false,
        })
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    pub fn topic_id(&self) -> Option<[u8; 16]> {
        self.topic_id
    }

    /// Records the partition's topic id in `partition.metadata`; a different stored id is
    /// an error (INCONSISTENT_TOPIC_ID).
    pub fn assign_topic_id(&mut self, topic_id: [u8; 16]) -> Result<(), StorageError> {
        self.topic_id = reconcile_topic_id(&self.dir, Some(topic_id), false)?;
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Applies new topic settings; they take effect for the next append / roll.
    pub fn update_config(&mut self, config: LogConfig) -> Result<(), StorageError> {
        config.validate()?;
        for segment in self.segments.values_mut() {
            segment.set_index_interval_bytes(&config);
        }
        self.config = config;
        Ok(())
    }

    /// The first offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offsets below this are replicated to every in-sync replica (UnifiedLog's high watermark).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Moves the high watermark forward to `offset` (capped at the log end); false if it
    /// would not move, as a high watermark never goes back on a leader.
    pub fn maybe_increment_high_watermark(&mut self, offset: i64) -> bool {
        let offset = offset.min(self.log_end_offset);
        if offset <= self.high_watermark {
            return false;
        }
        self.high_watermark = offset;
        self.producer_state.on_high_watermark_updated(offset);
        true
    }

    /// The last stable offset (KIP-98): below it every transaction is decided and its marker
    /// replicated, what read_committed consumers may read. The high watermark, or the first
    /// offset of the oldest unstable transaction if lower, never below the log start.
    pub fn last_stable_offset(&self) -> i64 {
        match self.producer_state.first_unstable_offset() {
            Some(first) => first.max(self.log_start_offset).min(self.high_watermark),
            None => self.high_watermark,
        }
    }

    /// Offsets below this are fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// What opening this log re-validated (nothing after a clean shutdown).
    pub fn recovered_at_open(&self) -> RecoveryStats {
        self.recovered
    }

    /// Where the flushes of rolled segments run (Kafka flushes a segment when it rolls).
    pub fn set_scheduler(&mut self, scheduler: Arc<Scheduler>) {
        self.scheduler = Some(scheduler);
    }

    /// The latest leader epoch that appended to this log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.leader_epoch_cache.latest_epoch()
    }

    /// OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), or (-1, -1).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.leader_epoch_cache
            .end_offset_for(epoch, self.log_end_offset)
    }

    pub fn leader_epoch_cache(&self) -> &LeaderEpochFileCache {
        &self.leader_epoch_cache
    }

    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    /// Total bytes of the `.log` files.
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }

    /// Records appended since the last flush.
    pub fn unflushed_messages(&self) -> i64 {
        self.unflushed_messages
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub(crate) fn active_segment(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    pub(crate) fn active_segment_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }

    /// Validates a Produce request's record set, assigns offsets and appends it.
    pub fn append_as_leader(
        &mut self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, AppendError> {
        self.append_as_leader_from(AppendOrigin::Client, records, leader_epoch, now_ms)
    }

    /// Validates a record set from `origin` as its leader, assigns offsets and appends it.
    ///
    /// The batches are stored exactly as produced except for the patched base offset,
    /// partition leader epoch and (for LogAppendTime topics) timestamp type, max timestamp
    /// and CRC.
    pub fn append_as_leader_from(
        &mut self,
        origin: AppendOrigin,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, AppendError> {
        if self.closed {
            return Err(AppendError::LogClosed);
        }
        if origin == AppendOrigin::Replication {
            return Err(AppendError::ReplicationAsLeader);
        }
        let target = Target {
            topic_partition: &self.topic_partition,
            config: &self.config,
        };
        let batches = validate_records(records, &target, origin, now_ms)?;
        let (mut buffer, batches) = recompress::to_topic_codec(records, batches, &self.config)?;
        // Like Kafka, the first retried batch answers the whole request; coordinators write
        // no sequence numbers to compare.
        if origin == AppendOrigin::Client {
            for validated in batches.iter().filter(|b| b.header.has_producer_id()) {
                if let Some(duplicate) = self.producer_state.find_duplicate(&validated.header) {
                    return Ok(self.duplicate_info(duplicate));
                }
            }
        }
        let mut staged = ProducerAppend::default();
        let mut next_offset = self.log_end_offset;
        for validated in &batches {
            let header = &validated.header;
            if header.has_producer_id() {
                let marker = if header.is_control() {
                    read_end_txn_marker(&buffer[validated.range.clone()], header)?
                } else {
                    None
                };
                self.producer_state
                    .validate(&mut staged, header, next_offset, origin, marker)?;
            }
            next_offset += i64::from(header.last_offset_delta) + 1;
        }

        let log_append_time = match self.config.message_timestamp_type {
            TimestampType::LogAppendTime => now_ms,
            TimestampType::CreateTime => NO_TIMESTAMP,
        };
        let mut appended = Vec::with_capacity(batches.len());
        let mut offset = self.log_end_offset;
        for validated in &batches {
            let bytes = &mut buffer[validated.range.clone()];
            batch::set_base_offset(bytes, offset);
            batch::set_partition_leader_epoch(bytes, leader_epoch);
            let header = &validated.header;
            let max_timestamp = match self.config.message_timestamp_type {
                TimestampType::LogAppendTime => now_ms,
                TimestampType::CreateTime => validated.max_timestamp,
            };
            let header_stale = header.max_timestamp != max_timestamp
                || header.timestamp_type() != self.config.message_timestamp_type;
            if header_stale {
                batch::set_max_timestamp(bytes, self.config.message_timestamp_type, max_timestamp);
            }
            let last_offset = offset + i64::from(header.last_offset_delta);
            appended.push(AppendedBatch {
                last_offset,
                max_timestamp,
                size: bytes.len() as u64,
            });
            offset = last_offset + 1;
        }
        let first_offset = self.log_end_offset;
        let last_offset = offset - 1;
        let max_timestamp = appended
            .iter()
            .map(|b| b.max_timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP);
        let incoming = IncomingAppend {
            size: buffer.len() as u64,
            max_timestamp,
            last_offset,
        };
        if self
            .active_segment()
            .should_roll(&self.config, &incoming, now_ms)
        {
            self.roll(now_ms)?;
        }
        self.active_segment_mut().append(&buffer, &appended)?;

        self.log_end_offset = offset;
        for (txn, last_stable_offset) in self.producer_state.commit(staged, offset) {
            self.active_segment_mut()
                .append_aborted_txn(&txn, last_stable_offset)?;
        }
        let record_count = offset - first_offset;
        self.unflushed_messages += record_count;
        self.leader_epoch_cache
            .assign(leader_epoch, first_offset)
            .map_err(|e| AppendError::Storage(io::Error::other(e.to_string())))?;
        self.maybe_flush_after_append()?;
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            max_timestamp,
            log_append_time,
            log_start_offset: self.log_start_offset,
            record_count,
            duplicate: false,
        })
    }

    /// `flush.messages`: fsync once that many records were appended since the last flush.
    pub(crate) fn maybe_flush_after_append(&mut self) -> Result<(), AppendError> {
        if self.unflushed_messages >= self.config.flush_interval_messages {
            self.flush()
                .map_err(|e| AppendError::Storage(io::Error::other(e.to_string())))?;
        }
        Ok(())
    }

    fn duplicate_info(&self, duplicate: BatchMetadata) -> LogAppendInfo {
        let log_append_time = match self.config.message_timestamp_type {
            TimestampType::LogAppendTime => duplicate.timestamp,
            TimestampType::CreateTime => NO_TIMESTAMP,
        };
        LogAppendInfo {
            first_offset: duplicate.first_offset,
            last_offset: duplicate.last_offset,
            max_timestamp: duplicate.timestamp,
            log_append_time,
            log_start_offset: self.log_start_offset,
            record_count: 0,
            duplicate: true,
        }
    }

    /// Starts a new active segment at the log end offset (snapshotting producer state there).
    pub fn roll(&mut self, now_ms: i64) -> io::Result<()> {
        let new_base = self.log_end_offset;
        if self.active_segment().base_offset() == new_base {
            return Ok(());
        }
        let segment = LogSegment::create(&self.dir, new_base, &self.config, now_ms)?;
        self.active_segment_mut().on_become_inactive()?;
        self.segments.insert(new_base, segment);
        self.producer_state.take_snapshot()?;
        self.schedule_flush_of_rolled_segments(new_base);
        Ok(())
    }

    /// As Kafka's roll does: fsync the segments below the new active one in the background,
    /// then advance the recovery point to its base, so that after a crash only the active
    /// segment is recovered.
    fn schedule_flush_of_rolled_segments(&self, new_base: i64) {
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        let Some(task) = self.flush_task_up_to(new_base) else {
            return;
        };
        let recovery_point = Arc::clone(&self.recovery_point);
        scheduler.schedule(move || match task.run() {
            Ok(()) => {
                recovery_point.fetch_max(task.up_to, Ordering::AcqRel);
            }
            // The log was deleted meanwhile: nothing is left to make durable.
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => {
                warn!(dir = %task.dir.display(), %error, "flushing rolled segments failed");
            }
        });
    }

    /// The fsync work that would make the whole log durable, or `None` if it already is.
    pub fn flush_task(&self) -> Option<FlushTask> {
        self.flush_task_up_to(self.log_end_offset)
    }

    /// The fsync work that makes every offset below `up_to` durable: the segments from the one
    /// holding the recovery point to the last one starting below `up_to`.
    fn flush_task_up_to(&self, up_to: i64) -> Option<FlushTask> {
        let recovery_point = self.recovery_point();
        if self.closed || recovery_point >= up_to {
            return None;
        }
        let first = self
            .segments
            .range(..=recovery_point)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        let unflushed = || {
            self.segments
                .range(first..up_to)
                .map(|(_, segment)| segment)
        };
        Some(FlushTask {
            log_files: unflushed().map(LogSegment::log_handle).collect(),
            paths: unflushed()
                .flat_map(LogSegment::index_paths)
                .chain([
                    self.leader_epoch_cache.path().to_path_buf(),
                    PartitionMetadataFile::new(&self.dir).path().to_path_buf(),
                ])
                .collect(),
            dir: self.dir.clone(),
            up_to,
            unflushed_messages: self.unflushed_messages,
        })
    }

    /// Records a successful `FlushTask::run`: the recovery point advances.
    pub fn complete_flush(&mut self, task: &FlushTask) {
        self.recovery_point.fetch_max(task.up_to, Ordering::AcqRel);
        self.unflushed_messages = (self.unflushed_messages - task.unflushed_messages).max(0);
        self.last_flush_ms = wall_clock_ms();
    }

    /// fsyncs everything appended so far.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        match self.flush_task() {
            Some(task) => {
                task.run().map_err(StorageError::io(&self.dir))?;
                self.complete_flush(&task);
            }
            None => self.last_flush_ms = wall_clock_ms(),
        }
        Ok(())
    }

    /// Whether `flush.messages` / `flush.ms` call for a flush, or a rolled segment awaits one.
    pub fn needs_flush(&self, now_ms: i64) -> bool {
        let recovery_point = self.recovery_point();
        if self.closed || recovery_point >= self.log_end_offset {
            return false;
        }
        self.unflushed_messages >= self.config.flush_interval_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_interval_ms
            || recovery_point < self.active_segment().base_offset()
    }

    /// Flushes, seals the active segment's indexes and snapshots producer state. Later calls
    /// on this log fail with "closed".
    pub fn close(&mut self) -> Result<(), StorageError> {
        if self.closed {
            return Ok(());
        }
        self.flush()?;
        self.active_segment_mut()
            .on_become_inactive()
            .map_err(StorageError::io(&self.dir))?;
        self.producer_state
            .take_snapshot()
            .map_err(StorageError::io(&self.dir))?;
        self.closed = true;
        Ok(())
    }

    /// Closes the log and removes its directory with every file in it.
    pub fn delete(&mut self) -> Result<(), StorageError> {
        self.closed = true;
        self.segments.clear();
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StorageError::io(&self.dir)(e)),
            _ => Ok(()),
        }
    }
}

/// Creates the partition's directory; true if this call made it (nothing can be in it).
fn make_partition_dir(dir: &Path) -> Result<bool, StorageError> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(StorageError::io(dir))?;
            Ok(true)
        }
        Err(error) => Err(StorageError::io(dir)(error)),
    }
}

/// The topic id of the partition in `dir` (`fresh`: a new, empty directory).
fn reconcile_topic_id(
    dir: &Path,
    topic_id: Option<[u8; 16]>,
    fresh: bool,
) -> Result<Option<[u8; 16]>, StorageError> {
    let file = PartitionMetadataFile::new(dir);
    let stored = if fresh { None } else { file.read()? };
    match (stored, topic_id) {
        (Some(stored), Some(given)) if stored != given => Err(StorageError::InconsistentTopicId {
            dir: dir.to_path_buf(),
        }),
        (None, Some(given)) => {
            file.write(&given)?;
            Ok(Some(given))
        }
        (stored, given) => Ok(stored.or(given)),
    }
}

#[cfg(test)]
mod high_watermark_tests {
    use crate::batch::test_batches::TestBatch;
    use crate::config::LogConfig;
    use crate::log::LoadParams;
    use crate::log_tests::{open_log, open_log_with, NOW};

    #[test]
    fn the_high_watermark_only_moves_forward_and_never_past_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), LogConfig::default());
        log.append_as_leader(&TestBatch::simple(3, NOW).encode(), 0, NOW)
            .unwrap();
        assert_eq!(log.high_watermark(), 0);
        assert!(log.maybe_increment_high_watermark(2));
        assert!(!log.maybe_increment_high_watermark(1));
        assert!(log.maybe_increment_high_watermark(10));
        assert_eq!((log.high_watermark(), log.last_stable_offset()), (3, 3));
    }

    #[test]
    fn a_reopened_log_starts_with_the_given_high_watermark_within_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), LogConfig::default());
        log.append_as_leader(&TestBatch::simple(3, NOW).encode(), 0, NOW)
            .unwrap();
        log.close().unwrap();
        let reopened_at = |high_watermark| {
            let params = LoadParams {
                high_watermark,
                ..LoadParams::default()
            };
            let log = open_log_with(dir.path(), LogConfig::default(), params);
            log.high_watermark()
        };
        assert_eq!(reopened_at(2), 2);
        assert_eq!(
            reopened_at(0),
            0,
            "no checkpoint: nothing counts as committed"
        );
        assert_eq!(reopened_at(9), 3, "never past the log end");
    }
}
