//! Kafka's `LogCleanerManager`: which compacted log to clean next, which are being cleaned,
//! and where each log's dirty section starts (`cleaner-offset-checkpoint`, one per log dir).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::checkpoint::OffsetCheckpointFile;
use crate::cleaner::clean::{CleanError, CleanStats, Cleaned, LogToClean};
use crate::log::SharedLog;
use crate::topic_partition::TopicPartition;

/// Kafka's file name for the cleaner's checkpoint.
pub const CLEANER_OFFSET_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// What the cleaner reports: its backlog and its last clean.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanerStatus {
    /// Bytes of compacted logs between their first dirty and first uncleanable offsets, summed
    /// at the cleaner's last look (the backlog).
    pub dirty_bytes: u64,
    /// The highest dirty ratio of a compacted log, in percent (Kafka's `max-dirty-percent`).
    pub max_dirty_percent: f64,
    /// Cleans finished since start.
    pub cleans_completed: u64,
    pub last_clean: Option<CleanStats>,
    /// Partitions a clean failed on; the cleaner skips them until restart (Kafka's
    /// `uncleanable-partitions-count`).
    pub uncleanable_partitions: Vec<TopicPartition>,
}

#[derive(Default)]
struct State {
    checkpoints: HashMap<PathBuf, BTreeMap<TopicPartition, i64>>,
    in_progress: HashSet<TopicPartition>,
    /// Partitions not to clean for now (a replica being swapped to another log dir).
    paused: HashSet<TopicPartition>,
    /// The latest delete horizon of the tombstones each log keeps: past it, the log is cleaned
    /// again even without new dirty records (KIP-534).
    tombstone_horizons: HashMap<TopicPartition, i64>,
    uncleanable: HashSet<TopicPartition>,
    status: CleanerStatus,
}

pub(crate) struct CleanerManager {
    logs: Arc<RwLock<BTreeMap<TopicPartition, SharedLog>>>,
    state: Mutex<State>,
}

impl CleanerManager {
    /// Reads each log dir's `cleaner-offset-checkpoint` (a malformed one is ignored: the logs
    /// are then cleaned from their start).
    pub(crate) fn new(
        log_dirs: &[PathBuf],
        logs: Arc<RwLock<BTreeMap<TopicPartition, SharedLog>>>,
    ) -> Self {
        let mut state = State::default();
        for dir in log_dirs {
            let file = OffsetCheckpointFile::new(dir.join(CLEANER_OFFSET_CHECKPOINT_FILE));
            let offsets = file.read().unwrap_or_else(|error| {
                warn!(%error, "ignoring the cleaner's checkpoint; logs are cleaned from their start");
                BTreeMap::new()
            });
            state.checkpoints.insert(dir.clone(), offsets);
        }
        Self {
            logs,
            state: Mutex::new(state),
        }
    }

    /// Keeps `tp` from being cleaned until `resume`; false (and nothing paused) while a
    /// clean of it is in progress.
    pub(crate) fn pause_unless_cleaning(&self, tp: &TopicPartition) -> bool {
        let mut state = self.state.lock();
        if state.in_progress.contains(tp) {
            return false;
        }
        state.paused.insert(tp.clone());
        true
    }

    pub(crate) fn resume(&self, tp: &TopicPartition) {
        self.state.lock().paused.remove(tp);
    }

    /// Kafka's `alterCheckpointDir`: the partition's log moved from log dir `from` to `to`,
    /// and its first dirty offset with it; both dirs' checkpoints are written.
    pub(crate) fn move_checkpoint(&self, tp: &TopicPartition, from: &Path, to: &Path) {
        let mut state = self.state.lock();
        let Some(offset) = state.checkpoints.get_mut(from).and_then(|o| o.remove(tp)) else {
            return;
        };
        state
            .checkpoints
            .entry(to.to_path_buf())
            .or_default()
            .insert(tp.clone(), offset);
        for dir in [from, to] {
            if let Err(error) = self.write_checkpoint(&mut state, dir) {
                warn!(%error, "writing the cleaner's checkpoint failed");
            }
        }
    }

    pub(crate) fn status(&self) -> CleanerStatus {
        self.state.lock().status.clone()
    }

    /// Kafka's `grabFilthiestCompactedLog`: the compacted log with the highest dirty ratio at or
    /// above its `min.cleanable.dirty.ratio` (or whose `max.compaction.lag.ms` passed), else one
    /// whose tombstones' horizon passed; marked in progress.
    pub(crate) fn grab_filthiest(&self, now_ms: i64) -> Option<(SharedLog, LogToClean)> {
        let logs: Vec<(TopicPartition, SharedLog)> = self
            .logs
            .read()
            .iter()
            .map(|(tp, log)| (tp.clone(), Arc::clone(log)))
            .collect();
        let mut state = self.state.lock();
        let mut candidates = Vec::new();
        for (tp, log) in logs {
            if state.in_progress.contains(&tp)
                || state.uncleanable.contains(&tp)
                || state.paused.contains(&tp)
            {
                continue;
            }
            let to_clean = {
                let guard = log.lock();
                if guard.is_closed() || !guard.config().cleanup_policy.compact {
                    continue;
                }
                let checkpoint = guard
                    .dir()
                    .parent()
                    .and_then(|dir| state.checkpoints.get(dir))
                    .and_then(|offsets| offsets.get(&tp))
                    .copied();
                LogToClean::take(&guard, checkpoint, now_ms)
            };
            candidates.push((log, to_clean));
        }
        state.status.dirty_bytes = candidates.iter().map(|(_, c)| c.cleanable_bytes()).sum();
        state.status.max_dirty_percent = candidates
            .iter()
            .map(|(_, c)| c.dirty_ratio() * 100.0)
            .fold(0.0, f64::max);
        let due = |c: &LogToClean| {
            c.cleanable_bytes() > 0
                && (c.dirty_ratio() >= c.config.min_cleanable_dirty_ratio
                    || c.compaction_overdue(now_ms))
        };
        let chosen = candidates
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| due(c))
            .max_by(|(_, (_, a)), (_, (_, b))| a.dirty_ratio().total_cmp(&b.dirty_ratio()))
            .map(|(i, _)| i)
            .or_else(|| {
                candidates.iter().position(|(_, c)| {
                    state
                        .tombstone_horizons
                        .get(&c.topic_partition)
                        .is_some_and(|horizon| *horizon <= now_ms)
                })
            })?;
        let (log, to_clean) = candidates.swap_remove(chosen);
        state.in_progress.insert(to_clean.topic_partition.clone());
        Some((log, to_clean))
    }

    /// Records the end of a clean of `to_clean`: on success its checkpoint moves to the new
    /// first dirty offset and is written to its log dir.
    pub(crate) fn done(&self, to_clean: &LogToClean, result: Result<Cleaned, CleanError>) {
        let tp = &to_clean.topic_partition;
        let mut state = self.state.lock();
        state.in_progress.remove(tp);
        let cleaned = match result {
            Ok(cleaned) => cleaned,
            Err(CleanError::Aborted | CleanError::LogChanged) => return,
            Err(error) => {
                warn!(partition = %tp, %error, "cleaning failed; the partition is not cleaned again until restart");
                state.uncleanable.insert(tp.clone());
                state.status.uncleanable_partitions = state.uncleanable.iter().cloned().collect();
                return;
            }
        };
        info!(
            partition = %tp,
            read = cleaned.stats.bytes_read,
            written = cleaned.stats.bytes_written,
            records_retained = cleaned.stats.records_retained,
            records_read = cleaned.stats.records_read,
            "cleaned log"
        );
        match cleaned.tombstone_horizon {
            Some(horizon) => state.tombstone_horizons.insert(tp.clone(), horizon),
            None => state.tombstone_horizons.remove(tp),
        };
        state.status.cleans_completed += 1;
        state.status.last_clean = Some(cleaned.stats);
        let Some(dir) = to_clean.dir.parent() else {
            return;
        };
        state
            .checkpoints
            .entry(dir.to_path_buf())
            .or_default()
            .insert(tp.clone(), cleaned.first_dirty_offset);
        if let Err(error) = self.write_checkpoint(&mut state, dir) {
            warn!(%error, "writing the cleaner's checkpoint failed");
        }
    }

    /// Writes `dir`'s checkpoint with the entries of logs that still exist.
    fn write_checkpoint(
        &self,
        state: &mut State,
        dir: &Path,
    ) -> Result<(), crate::error::StorageError> {
        let logs = self.logs.read();
        let Some(offsets) = state.checkpoints.get_mut(dir) else {
            return Ok(());
        };
        offsets.retain(|tp, _| logs.contains_key(tp));
        OffsetCheckpointFile::new(dir.join(CLEANER_OFFSET_CHECKPOINT_FILE)).write(offsets)
    }
}
