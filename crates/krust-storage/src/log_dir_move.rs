//! Moving a replica between this broker's log dirs (AlterReplicaLogDirs, KIP-113), as Kafka's
//! `ReplicaAlterLogDirsThread` and `LogManager` do it.
//!
//! The move creates a *future log*, `<topic>-<partition>.<id>-future`, in the destination dir
//! and copies the current log into it batch by batch, as a follower copies its leader (the
//! batches keep their offsets and leader epochs; a current log that truncates or moves its
//! log start is followed). Once the future log has caught up, it replaces the current one
//! under the current log's lock, so no append lands between the last copy and the swap: the
//! current directory is renamed `<topic>-<partition>.<id>-delete`, the future directory
//! `<topic>-<partition>`, and the log every holder of the partition's `SharedLog` sees is the
//! promoted one. The old directory is removed after `file.delete.delay.ms`.
//!
//! A restart resumes a copy: future dirs load as future logs. `-delete` dirs left by a stop
//! are removed at start-up, and a future dir whose partition has no current dir (the broker
//! stopped between the two renames of a promotion) becomes the current log.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::error::{AppendError, ReadError, StorageError};
use crate::log::{wall_clock_ms, LoadParams, Log, SharedLog};
use crate::log_file_utils::sync_dir;
use crate::log_manager::LogManager;
use crate::topic_partition::{
    suffixed_dir_name, TopicPartition, DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX,
};

/// What one step of a move did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveProgress {
    /// The partition has no future log (or no current log to copy from).
    Idle,
    /// Bytes were copied (possibly none); the future log trails by `lag` offsets.
    Copying { copied_bytes: usize, lag: i64 },
    /// The future log replaced the current one.
    Promoted,
}

fn read_failed(dir: &Path, error: ReadError) -> StorageError {
    match error {
        ReadError::LogClosed => StorageError::LogClosed,
        ReadError::Storage(source) => StorageError::Io {
            path: dir.to_path_buf(),
            source,
        },
        other => StorageError::Malformed {
            path: dir.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

fn append_failed(dir: &Path, error: AppendError) -> StorageError {
    match error {
        AppendError::LogClosed => StorageError::LogClosed,
        AppendError::Storage(source) => StorageError::Io {
            path: dir.to_path_buf(),
            source,
        },
        other => StorageError::Malformed {
            path: dir.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Brings the future log in line with the current one before a copy, as a follower does
/// with its leader: past the current log's start, truncated where the two diverge (by
/// leader epoch) or where the current log ends, and with the current high watermark and
/// log start offset where the future log has them.
fn reconcile(current: &Log, future: &mut Log) -> Result<(), StorageError> {
    if current.is_closed() || future.is_closed() {
        return Err(StorageError::LogClosed);
    }
    let start = current.log_start_offset();
    if future.log_end_offset() < start || future.log_start_offset() > current.log_end_offset() {
        future.truncate_fully_and_start_at(start)?;
        return Ok(());
    }
    if let Some(epoch) = future.latest_epoch() {
        let (current_epoch, current_end) = current.end_offset_for_epoch(epoch);
        let target = if current_epoch == epoch {
            current_end
        } else if current_epoch < 0 {
            current.high_watermark()
        } else {
            current_end.min(future.end_offset_for_epoch(current_epoch).1)
        };
        if target < future.log_start_offset() {
            future.truncate_fully_and_start_at(start)?;
            return Ok(());
        }
        future.truncate_to(target)?;
    }
    future.truncate_to(current.log_end_offset())?;
    future.maybe_increment_high_watermark(current.high_watermark().min(future.log_end_offset()));
    if start > future.log_start_offset() && start <= future.high_watermark() {
        future.maybe_increment_log_start_offset(start)?;
    }
    Ok(())
}

/// What one unlocked copy did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Copied {
    bytes: usize,
    /// The copy reached the current log's end as it was when the copy started: what is
    /// left is only what was appended meanwhile.
    reached_end: bool,
}

/// Copies up to `max_bytes` of whole batches from `current` to `future`, the read itself done
/// without either lock.
fn copy_step(
    current: &SharedLog,
    future: &SharedLog,
    max_bytes: usize,
) -> Result<Copied, StorageError> {
    let (plan, from, end, dir) = {
        let current = current.lock();
        let mut future = future.lock();
        reconcile(&current, &mut future)?;
        let from = future.log_end_offset();
        let end = current.log_end_offset();
        if from >= end {
            return Ok(Copied {
                bytes: 0,
                reached_end: true,
            });
        }
        let plan = current
            .read_plan(from, end)
            .map_err(|e| read_failed(current.dir(), e))?;
        (plan, from, end, current.dir().to_path_buf())
    };
    let data = plan
        .read(max_bytes, true)
        .map_err(|e| read_failed(&dir, e))?;
    let bytes = data.records.read_bytes().map_err(StorageError::io(&dir))?;
    let nothing = Copied {
        bytes: 0,
        reached_end: false,
    };
    if bytes.is_empty() {
        return Ok(nothing);
    }
    let mut future = future.lock();
    if future.log_end_offset() != from {
        // Truncated meanwhile: the next step reads again.
        return Ok(nothing);
    }
    let future_dir = future.dir().to_path_buf();
    future
        .append_as_follower(&bytes, wall_clock_ms())
        .map_err(|e| append_failed(&future_dir, e))?;
    Ok(Copied {
        bytes: bytes.len(),
        reached_end: future.log_end_offset() >= end,
    })
}

/// `copy_step` with the current log locked throughout (nothing can be appended meanwhile).
fn copy_locked(current: &Log, future: &mut Log, max_bytes: usize) -> Result<usize, StorageError> {
    reconcile(current, future)?;
    let from = future.log_end_offset();
    if from >= current.log_end_offset() {
        return Ok(0);
    }
    let data = current
        .read(from, max_bytes, current.log_end_offset(), true)
        .map_err(|e| read_failed(current.dir(), e))?;
    let bytes = data
        .records
        .read_bytes()
        .map_err(StorageError::io(current.dir()))?;
    let future_dir = future.dir().to_path_buf();
    future
        .append_as_follower(&bytes, wall_clock_ms())
        .map_err(|e| append_failed(&future_dir, e))?;
    Ok(bytes.len())
}

impl LogManager {
    /// Kafka's `isLogDirOnline`: the configured log dir whose absolute path is `path`
    /// (LOG_DIR_NOT_FOUND if none is, KAFKA_STORAGE_ERROR if it is offline).
    pub fn online_log_dir(&self, path: &str) -> Result<PathBuf, StorageError> {
        let dir = self
            .log_dirs()
            .iter()
            .find(|dir| std::path::absolute(dir).is_ok_and(|a| a == Path::new(path)))
            .ok_or_else(|| StorageError::LogDirNotFound(path.to_string()))?;
        if self.failures.is_offline(dir) {
            return Err(StorageError::LogDirOffline(dir.clone()));
        }
        Ok(dir.clone())
    }

    /// The partition's future log, while it is being moved to another log dir.
    pub fn future_log(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.future_logs.lock().get(tp).cloned()
    }

    /// Partitions with a future log.
    pub fn future_partitions(&self) -> Vec<TopicPartition> {
        self.future_logs.lock().keys().cloned().collect()
    }

    /// The log dir of the partition's future log.
    pub fn future_log_dir(&self, tp: &TopicPartition) -> Option<PathBuf> {
        let future = self.future_log(tp)?;
        let dir = future.lock().dir().parent().map(Path::to_path_buf);
        dir
    }

    /// Kafka's `maybeUpdatePreferredLogDir`: a partition created here later goes to `dir`,
    /// unless its current or future log is already there.
    pub fn maybe_update_preferred_log_dir(&self, tp: &TopicPartition, dir: &Path) {
        let in_dir =
            |log: Option<SharedLog>| log.is_some_and(|log| log.lock().dir().parent() == Some(dir));
        if !in_dir(self.get(tp)) && !in_dir(self.future_log(tp)) {
            self.preferred_dirs
                .lock()
                .insert(tp.clone(), dir.to_path_buf());
        }
    }

    /// Kafka's `removeFutureLocalReplica`: stops a move, deleting its future log; false if
    /// there was none.
    pub fn remove_future_log(&self, tp: &TopicPartition) -> Result<bool, StorageError> {
        let Some(log) = self.future_logs.lock().remove(tp) else {
            return Ok(false);
        };
        let mut log = log.lock();
        if let Some(parent) = log.dir().parent() {
            self.release_dir(parent);
        }
        info!(partition = %tp, dir = %log.dir().display(), "removing the future log");
        log.delete()?;
        Ok(true)
    }

    /// Kafka's `maybeCreateFutureReplica`: starts moving the partition's log to `dir` by
    /// creating its future log there. False when there is nothing to do: no current log, the
    /// current log already in `dir`, or a future log already there.
    pub fn maybe_create_future_log(
        &self,
        tp: &TopicPartition,
        dir: &Path,
    ) -> Result<bool, StorageError> {
        let _creating = self.creator.lock();
        let Some(current) = self.get(tp) else {
            return Ok(false);
        };
        let (topic_id, config, log_start_offset) = {
            let current = current.lock();
            if current.dir().parent() == Some(dir) {
                return Ok(false);
            }
            (
                current.topic_id(),
                current.config().clone(),
                current.log_start_offset(),
            )
        };
        let mut futures = self.future_logs.lock();
        if let Some(future) = futures.get(tp) {
            if future.lock().dir().parent() == Some(dir) {
                return Ok(false);
            }
            // Another destination: the caller removes that move first, as Kafka does.
            return Err(StorageError::InvalidConfig(format!(
                "{tp} is already being moved to another log dir"
            )));
        }
        let path = dir.join(suffixed_dir_name(tp, FUTURE_DIR_SUFFIX));
        let params = LoadParams {
            log_start_offset,
            ..LoadParams::default()
        };
        match Log::open(&path, tp.clone(), topic_id, config, params, wall_clock_ms()) {
            Ok(mut log) => {
                log.set_scheduler(Arc::clone(&self.scheduler));
                info!(partition = %tp, dir = %path.display(), "created a future log");
                *self
                    .logs_per_dir
                    .lock()
                    .entry(dir.to_path_buf())
                    .or_default() += 1;
                futures.insert(tp.clone(), Arc::new(parking_lot::Mutex::new(log)));
                Ok(true)
            }
            Err(error) => {
                if let StorageError::Io { .. } = error {
                    self.failures.maybe_add_offline_log_dir(dir, &error);
                }
                Err(error)
            }
        }
    }

    /// One step of Kafka's `ReplicaAlterLogDirsThread` for `tp`: copies up to `max_bytes`
    /// from the current log to the future log and, once a copy reached the current log's
    /// end, promotes it. The final catch-up (what was appended since) and the swap hold the
    /// current log's lock, copying at most another `max_bytes` under it (otherwise the next
    /// step tries again).
    pub fn advance_future_log(
        &self,
        tp: &TopicPartition,
        max_bytes: usize,
    ) -> Result<MoveProgress, StorageError> {
        let (Some(current), Some(future)) = (self.get(tp), self.future_log(tp)) else {
            return Ok(MoveProgress::Idle);
        };
        let copied = copy_step(&current, &future, max_bytes)?;
        let copied_bytes = copied.bytes;
        let lag = current.lock().log_end_offset() - future.lock().log_end_offset();
        if !copied.reached_end {
            return Ok(MoveProgress::Copying { copied_bytes, lag });
        }
        if self.promote(tp, &current, &future, max_bytes)? {
            return Ok(MoveProgress::Promoted);
        }
        let lag = current.lock().log_end_offset() - future.lock().log_end_offset();
        Ok(MoveProgress::Copying { copied_bytes, lag })
    }

    /// Kafka's `maybeReplaceCurrentWithFutureReplica` and `replaceCurrentWithFutureLog`.
    fn promote(
        &self,
        tp: &TopicPartition,
        current: &SharedLog,
        future: &SharedLog,
        max_bytes: usize,
    ) -> Result<bool, StorageError> {
        // As Kafka pauses cleaning for a moved log: no clean may rewrite segments of the
        // directory being renamed away. One under way now: the next step tries again.
        let cleaner = self.cleaner.lock();
        if let Some(cleaner) = cleaner.as_ref() {
            if !cleaner.pause_unless_cleaning(tp) {
                return Ok(false);
            }
        }
        let promoted = self.promote_paused(tp, current, future, max_bytes);
        if let Some(cleaner) = cleaner.as_ref() {
            // Kafka's `alterCheckpointDir`: the cleaned part stays clean in the new dir.
            // (After the logs' locks are released: the checkpoint reads the log map.)
            if let Ok(Some((from, to))) = &promoted {
                cleaner.move_checkpoint(tp, from, to);
            }
            cleaner.resume(tp);
        }
        promoted.map(|moved| moved.is_some())
    }

    fn promote_paused(
        &self,
        tp: &TopicPartition,
        current: &SharedLog,
        future: &SharedLog,
        max_bytes: usize,
    ) -> Result<Option<(PathBuf, PathBuf)>, StorageError> {
        let mut futures = self.future_logs.lock();
        if !futures.get(tp).is_some_and(|f| Arc::ptr_eq(f, future)) {
            return Ok(None);
        }
        let mut current = current.lock();
        let mut future = future.lock();
        let mut budget = max_bytes;
        loop {
            reconcile(&current, &mut future)?;
            if future.log_end_offset() == current.log_end_offset() {
                break;
            }
            let copied = copy_locked(&current, &mut future, budget)?;
            if copied == 0 || copied >= budget {
                return Ok(None);
            }
            budget -= copied;
        }
        let moved = self.swap_locked(tp, &mut current, &mut future)?;
        futures.remove(tp);
        Ok(Some(moved))
    }

    /// With both logs locked and equal: the future directory becomes the partition's, the
    /// current one is renamed for deletion, and `current` is the promoted log. The log dirs
    /// moved from and to.
    fn swap_locked(
        &self,
        tp: &TopicPartition,
        current: &mut Log,
        future: &mut Log,
    ) -> Result<(PathBuf, PathBuf), StorageError> {
        let high_watermark = current.high_watermark();
        let log_start_offset = future.log_start_offset().max(current.log_start_offset());
        let log_end_offset = future.log_end_offset();
        // Everything the future log holds is fsynced, with its producer snapshot.
        future.close()?;
        let source = current.dir().to_path_buf();
        let source_parent = source.parent().map(Path::to_path_buf).unwrap_or_default();
        let future_dir = future.dir().to_path_buf();
        let dest_parent = future_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // The current directory goes first: a stop between the two renames leaves a future
        // log without a current one, which the next start promotes (`prepare_log_dirs`).
        let doomed = source_parent.join(suffixed_dir_name(tp, DELETE_DIR_SUFFIX));
        let renamed = fs::rename(&source, &doomed).and_then(|()| sync_dir(&source_parent));
        if let Err(error) = renamed {
            self.failures
                .maybe_add_offline_log_dir(&source_parent, &error);
            return Err(StorageError::io(&source)(error));
        }
        current.closed = true;
        let target = dest_parent.join(tp.dir_name());
        let renamed = fs::rename(&future_dir, &target).and_then(|()| sync_dir(&dest_parent));
        if let Err(error) = renamed {
            self.failures
                .maybe_add_offline_log_dir(&dest_parent, &error);
            return Err(StorageError::io(&future_dir)(error));
        }
        let params = LoadParams {
            recovery_point: log_end_offset,
            log_start_offset,
            had_clean_shutdown: true,
            high_watermark,
        };
        let mut promoted = Log::open(
            &target,
            tp.clone(),
            current.topic_id(),
            current.config().clone(),
            params,
            wall_clock_ms(),
        )?;
        promoted.set_scheduler(Arc::clone(&self.scheduler));
        // Every holder of the partition's SharedLog sees the promoted log from here on.
        let old = std::mem::replace(current, promoted);
        let delay_ms = old.config().file_delete_delay_ms;
        drop(old);
        self.release_dir(&source_parent);
        let delay = Duration::from_millis(u64::try_from(delay_ms).unwrap_or(0));
        self.scheduler.schedule_after(delay, move || {
            if let Err(error) = fs::remove_dir_all(&doomed) {
                if error.kind() != io::ErrorKind::NotFound {
                    warn!(dir = %doomed.display(), %error, "cannot remove a moved log's old directory");
                }
            }
        });
        info!(
            partition = %tp,
            from = %source_parent.display(),
            to = %dest_parent.display(),
            "the future log replaced the current log"
        );
        Ok((source_parent, dest_parent))
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// One unlocked copy step, without the promotion.
    pub(crate) fn copy(current: &SharedLog, future: &SharedLog, max_bytes: usize) -> usize {
        copy_step(current, future, max_bytes).unwrap().bytes
    }
}
