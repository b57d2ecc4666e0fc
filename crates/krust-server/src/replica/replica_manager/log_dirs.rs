//! Moving replicas between this broker's log dirs: Kafka's `ReplicaManager.alterReplicaLogDirs`
//! and its `ReplicaAlterLogDirsThread`, which here is one thread (`krust-alter-log-dirs`)
//! stepping every future log through krust-storage's copy and promotion
//! (`LogManager::advance_future_log`).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use krust_storage::topic_partition::future_dir_name_too_long;
use krust_storage::{MoveProgress, StorageError, TopicPartition};
use parking_lot::Mutex;

use super::{ErrorCode, ReplicaManager};
use crate::metadata::metadata_log::METADATA_LOG_TOPIC;

/// How long the mover waits for work when no copy made progress.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// The throttle's window: `replica.alter.log.dirs.io.max.bytes.per.second` per this long.
const THROTTLE_WINDOW: Duration = Duration::from_secs(1);

/// Kafka's `replica.alter.log.dirs.io.max.bytes.per.second`: the bytes all moves together
/// may copy per second.
#[derive(Debug)]
struct CopyThrottle {
    bytes_per_second: u64,
    window_start: Instant,
    used: u64,
}

impl CopyThrottle {
    fn new(bytes_per_second: i64, now: Instant) -> Self {
        let mut throttle = Self {
            bytes_per_second: 1,
            window_start: now,
            used: 0,
        };
        throttle.set_rate(bytes_per_second);
        throttle
    }

    /// A new rate, from the current window on.
    fn set_rate(&mut self, bytes_per_second: i64) {
        self.bytes_per_second = u64::try_from(bytes_per_second).unwrap_or(0).max(1);
    }

    /// The bytes the moves may copy now, or how long to wait for the next window.
    fn budget(&mut self, now: Instant) -> Result<u64, Duration> {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= THROTTLE_WINDOW {
            self.window_start = now;
            self.used = 0;
        }
        match self.bytes_per_second.saturating_sub(self.used) {
            0 => Err(THROTTLE_WINDOW.saturating_sub(elapsed)),
            left => Ok(left),
        }
    }

    fn record(&mut self, bytes: u64) {
        self.used = self.used.saturating_add(bytes);
    }
}

/// The running mover thread: woken when a move starts, stopped before the logs close.
pub(crate) struct LogDirMover {
    wake: SyncSender<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LogDirMover {
    fn wake(&self) {
        // A full queue already holds a wake-up.
        let _ = self.wake.try_send(());
    }

    pub(crate) fn shutdown(&self) {
        let thread = self.thread.lock().take();
        if let Some(thread) = thread {
            // Disconnecting ends the thread's wait; the thread also checks its Weak.
            let _ = self.wake.try_send(());
            let _ = thread.join();
        }
    }
}

impl ReplicaManager {
    /// Kafka's `alterReplicaLogDirs`: for each partition and absolute log dir path, starts
    /// moving the partition's replica there (or does nothing if it is there already); a
    /// partition not hosted yet is created there later. One error code per partition.
    pub fn alter_replica_log_dirs(
        &self,
        moves: Vec<(TopicPartition, String)>,
    ) -> Vec<(TopicPartition, ErrorCode)> {
        let _altering = self.altering_log_dirs.lock();
        moves
            .into_iter()
            .map(|(tp, path)| {
                let code = match self.alter_replica_log_dir(&tp, &path) {
                    Ok(()) => 0,
                    Err(error) => {
                        tracing::warn!(partition = %tp, dir = %path, %error, "unable to alter the log dir");
                        error.code()
                    }
                };
                (tp, code)
            })
            .collect()
    }

    fn alter_replica_log_dir(&self, tp: &TopicPartition, path: &str) -> Result<(), MoveError> {
        if future_dir_name_too_long(tp) {
            return Err(MoveError::Kafka(
                ResponseError::InvalidTopicException,
                "the topic name is too long".into(),
            ));
        }
        let dir = self.log_manager.online_log_dir(path)?;
        if self.offline.read().contains(tp) {
            return Err(MoveError::Kafka(
                ResponseError::KafkaStorageError,
                format!("partition {tp} is offline"),
            ));
        }
        // KRaft keeps the metadata log outside Kafka's LogManager: it is never a replica here.
        let hosted = if tp.topic == METADATA_LOG_TOPIC {
            None
        } else {
            self.partition(&tp.topic, tp.partition)
        };
        if hosted.is_some() {
            // Another destination than the move under way: that move stops.
            let future_dir = self.log_manager.future_log_dir(tp);
            if future_dir.is_some_and(|d| d != dir) {
                self.log_manager.remove_future_log(tp)?;
            }
        }
        if tp.topic != METADATA_LOG_TOPIC {
            self.log_manager.maybe_update_preferred_log_dir(tp, &dir);
        }
        if hosted.is_none() {
            // Kafka keeps REPLICA_NOT_AVAILABLE here for compatibility.
            return Err(MoveError::Kafka(
                ResponseError::ReplicaNotAvailable,
                format!("{tp} has no replica on this broker"),
            ));
        }
        if self.log_manager.maybe_create_future_log(tp, &dir)? {
            if let Some(mover) = self.log_dir_mover.get() {
                mover.wake();
            }
        }
        Ok(())
    }

    /// Starts the thread that copies future logs and promotes them (it resumes the moves a
    /// restart found). It ends with the replica manager or at `shutdown`.
    pub fn start_log_dir_mover(self: &Arc<Self>) -> std::io::Result<()> {
        let (wake, woken) = mpsc::sync_channel(1);
        let manager: Weak<Self> = Arc::downgrade(self);
        let max_bytes = u64::try_from(self.replication.replica_fetch_max_bytes)
            .unwrap_or(1 << 20)
            .max(1);
        let rate = self
            .replication
            .replica_alter_log_dirs_io_max_bytes_per_second;
        self.alter_log_dirs_rate.store(rate, Ordering::Relaxed);
        let mut throttle = CopyThrottle::new(rate, Instant::now());
        let thread = std::thread::Builder::new()
            .name("krust-alter-log-dirs".into())
            .spawn(move || loop {
                let Some(replicas) = manager.upgrade() else {
                    return;
                };
                if replicas.stopping_log_dir_mover() {
                    return;
                }
                throttle.set_rate(replicas.alter_log_dirs_rate.load(Ordering::Relaxed));
                let wait = match throttle.budget(Instant::now()) {
                    Err(wait) => wait.min(IDLE_WAIT),
                    Ok(budget) => {
                        let copied = replicas.advance_moves(max_bytes, budget);
                        throttle.record(copied);
                        if copied > 0 {
                            continue;
                        }
                        IDLE_WAIT
                    }
                };
                drop(replicas);
                match woken.recv_timeout(wait) {
                    Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            })?;
        let mover = LogDirMover {
            wake,
            thread: Mutex::new(Some(thread)),
        };
        let _ = self.log_dir_mover.set(mover);
        Ok(())
    }

    /// `replica.alter.log.dirs.io.max.bytes.per.second` in force (a dynamic broker config in
    /// Kafka, which `kafka-reassign-partitions --replica-alter-log-dirs-throttle` sets).
    pub fn set_alter_log_dirs_throttled_rate(&self, bytes_per_second: i64) {
        self.alter_log_dirs_rate
            .store(bytes_per_second, Ordering::Relaxed);
    }

    fn stopping_log_dir_mover(&self) -> bool {
        self.log_dir_mover
            .get()
            .is_some_and(|m| m.thread.lock().is_none())
    }

    /// One step of every move, each copying at most `max_bytes` and all together about
    /// `budget`; the bytes copied.
    fn advance_moves(&self, max_bytes: u64, budget: u64) -> u64 {
        let mut copied = 0u64;
        for tp in self.log_manager.future_partitions() {
            // As Kafka, a move (one a restart found too) goes on once the partition is hosted
            // again: after the metadata, and the dynamic configs with the throttle, are applied.
            if self.partition(&tp.topic, tp.partition).is_none() {
                continue;
            }
            let step = max_bytes.min(budget.saturating_sub(copied));
            if step == 0 {
                break;
            }
            let step = usize::try_from(step).unwrap_or(usize::MAX);
            match self.log_manager.advance_future_log(&tp, step) {
                Ok(MoveProgress::Copying { copied_bytes, .. }) => {
                    copied = copied.saturating_add(copied_bytes as u64);
                }
                Ok(MoveProgress::Promoted) => {
                    tracing::info!(partition = %tp, "moved the replica to its new log dir");
                }
                Ok(MoveProgress::Idle) => {}
                Err(StorageError::Io { path, source }) => {
                    // As Kafka: the dir that failed goes offline, with its logs (a future log
                    // there, or the partition if its current log is there).
                    tracing::warn!(partition = %tp, path = %path.display(), error = %source, "copying the future log failed");
                    if let Some(dir) = self.log_dir_holding(&path) {
                        self.log_manager
                            .failure_channel()
                            .maybe_add_offline_log_dir(&dir, &source);
                    }
                }
                Err(error) => {
                    // Anything else would fail again at every step: the move stops (a new
                    // AlterReplicaLogDirs starts it again).
                    tracing::error!(partition = %tp, %error, "stopping the move of the replica to another log dir");
                    if let Err(error) = self.log_manager.remove_future_log(&tp) {
                        tracing::warn!(partition = %tp, %error, "cannot remove the future log");
                    }
                }
            }
        }
        copied
    }

    /// The configured log dir `path` lies in.
    fn log_dir_holding(&self, path: &Path) -> Option<PathBuf> {
        self.log_manager
            .log_dirs()
            .iter()
            .find(|dir| path.starts_with(dir))
            .cloned()
    }
}

/// Why a partition's move was refused.
#[derive(Debug, thiserror::Error)]
enum MoveError {
    #[error("{1}")]
    Kafka(ResponseError, String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl MoveError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Kafka(error, _) => error.code(),
            Self::Storage(StorageError::LogDirNotFound(_)) => ResponseError::LogDirNotFound.code(),
            // Kafka answers KAFKA_STORAGE_ERROR for every other failure to create the
            // future log.
            Self::Storage(_) => ResponseError::KafkaStorageError.code(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_copy_at_most_replica_alter_log_dirs_io_max_bytes_per_second() {
        let start = Instant::now();
        let mut throttle = CopyThrottle::new(1000, start);
        assert_eq!(throttle.budget(start), Ok(1000));
        throttle.record(600);
        assert_eq!(throttle.budget(start), Ok(400));
        throttle.record(400);
        let half = start + Duration::from_millis(500);
        assert_eq!(throttle.budget(half), Err(Duration::from_millis(500)));
        // The next second has the whole rate again.
        assert_eq!(throttle.budget(start + THROTTLE_WINDOW), Ok(1000));
        // Kafka's default (Long.MAX_VALUE) never waits.
        let mut unlimited = CopyThrottle::new(i64::MAX, start);
        unlimited.record(1 << 40);
        assert!(unlimited.budget(start).is_ok());
    }
}
