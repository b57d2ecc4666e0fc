//! `LogManager`: every partition log under the configured `log.dirs`, their checkpoints and
//! the clean-shutdown marker. The high watermarks are checkpointed here too (Kafka's
//! ReplicaManager writes that file), since the `Log` owns its high watermark and a log dir's
//! logs are loaded here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use crate::checkpoint::{
    write_atomically, OffsetCheckpointFile, HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
};
use crate::cleaner::{CleanerConfig, CleanerStatus, LogCleaner};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::log::{wall_clock_ms, LoadParams, Log};
use crate::log_dir_failure::LogDirFailureChannel;
use crate::log_dir_lock::LogDirLock;
use crate::log_file_utils::sync_dir;
use crate::scheduler::Scheduler;
use crate::topic_partition::{
    future_dir_partition, is_future_dir, is_valid_topic_name, suffixed_dir_partition,
    TopicPartition, DELETE_DIR_SUFFIX,
};

/// Kafka's marker that a log dir was shut down cleanly (its logs need no recovery scan).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

pub use crate::log::SharedLog;

pub struct LogManager {
    log_dirs: Vec<PathBuf>,
    default_config: LogConfig,
    logs: Arc<RwLock<BTreeMap<TopicPartition, SharedLog>>>,
    /// Future logs (`<topic>-<partition>.<id>-future`): copies of current logs being moved
    /// to another log dir by AlterReplicaLogDirs (`log_dir_move`).
    pub(crate) future_logs: Mutex<BTreeMap<TopicPartition, SharedLog>>,
    /// Where a partition not hosted yet is to be created (Kafka's `preferredLogDirs`).
    pub(crate) preferred_dirs: Mutex<HashMap<TopicPartition, PathBuf>>,
    /// How many logs each log dir holds, for placing new ones without visiting every log.
    pub(crate) logs_per_dir: Mutex<HashMap<PathBuf, usize>>,
    pub(crate) failures: Arc<LogDirFailureChannel>,
    /// Held until shutdown (or until the manager is dropped).
    locks: Mutex<Vec<LogDirLock>>,
    /// Flushes rolled segments off the request path.
    pub(crate) scheduler: Arc<Scheduler>,
    checkpoint_writer: Mutex<()>,
    /// Held while new logs are created.
    pub(crate) creator: Mutex<()>,
    pub(crate) cleaner: Mutex<Option<LogCleaner>>,
}

/// A partition whose log `get_or_create_all` returns, created with these settings if missing.
pub struct LogSpec {
    pub topic_partition: TopicPartition,
    pub topic_id: Option<[u8; 16]>,
    pub config: LogConfig,
}

/// An existing log takes the spec's config and, when given, its topic id.
fn update_config_and_topic_id(log: &SharedLog, spec: LogSpec) -> Result<(), StorageError> {
    let mut guard = log.lock();
    guard.update_config(spec.config)?;
    if let Some(topic_id) = spec.topic_id {
        guard.assign_topic_id(topic_id)?;
    }
    Ok(())
}

impl LogManager {
    /// Loads every `<topic>-<partition>` directory under `log_dirs` (creating missing dirs),
    /// recovering logs of dirs without the clean-shutdown marker, then removes the marker.
    pub fn open(log_dirs: &[PathBuf], default_config: LogConfig) -> Result<Self, StorageError> {
        default_config.validate()?;
        if log_dirs.is_empty() {
            return Err(StorageError::InvalidConfig("log.dirs is empty".to_string()));
        }
        let locks = lock_log_dirs(log_dirs)?;
        let scheduler = start_scheduler()?;
        prepare_log_dirs(log_dirs)?;
        let mut logs = BTreeMap::new();
        let mut future_logs = BTreeMap::new();
        let mut logs_per_dir = HashMap::new();
        for dir in log_dirs {
            let loaded = load_log_dir(dir, &default_config)?;
            logs_per_dir.insert(dir.clone(), loaded.len());
            for (tp, log) in loaded {
                let future = is_future_dir(log.dir());
                let target = if future { &mut future_logs } else { &mut logs };
                if target.contains_key(&tp) {
                    return Err(StorageError::DuplicateLog(tp.to_string()));
                }
                target.insert(tp, share(log, &scheduler));
            }
            let marker = dir.join(CLEAN_SHUTDOWN_FILE);
            if marker.exists() {
                fs::remove_file(&marker).map_err(StorageError::io(&marker))?;
            }
        }
        Ok(Self {
            log_dirs: log_dirs.to_vec(),
            default_config,
            logs: Arc::new(RwLock::new(logs)),
            future_logs: Mutex::new(future_logs),
            preferred_dirs: Mutex::default(),
            logs_per_dir: Mutex::new(logs_per_dir),
            failures: Arc::default(),
            locks: Mutex::new(locks),
            scheduler,
            checkpoint_writer: Mutex::new(()),
            creator: Mutex::new(()),
            cleaner: Mutex::new(None),
        })
    }

    /// Starts the log cleaner (`log.cleaner.enable`) over this manager's logs.
    pub fn start_cleaner(&self, config: &CleanerConfig) -> Result<(), StorageError> {
        let mut cleaner = self.cleaner.lock();
        if !config.enable || config.threads == 0 || cleaner.is_some() {
            return Ok(());
        }
        *cleaner = Some(
            LogCleaner::start(
                config,
                &self.log_dirs,
                Arc::clone(&self.logs),
                Arc::clone(&self.failures),
            )
            .map_err(StorageError::io("kafka-log-cleaner-thread"))?,
        );
        Ok(())
    }

    /// Applies cleaner settings changed while the broker runs (Kafka's dynamic
    /// `log.cleaner.*` keys): the threads restart with them. Nothing happens while the
    /// cleaner does not run; `start_cleaner` takes the settings then.
    pub fn reconfigure_cleaner(&self, config: &CleanerConfig) -> Result<(), StorageError> {
        match self.cleaner.lock().as_mut() {
            Some(running) => running
                .reconfigure(config)
                .map_err(StorageError::io("kafka-log-cleaner-thread")),
            None => Ok(()),
        }
    }

    /// The cleaner's backlog and last clean; `None` when it does not run.
    pub fn cleaner_status(&self) -> Option<CleanerStatus> {
        self.cleaner.lock().as_ref().map(LogCleaner::status)
    }

    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.log_dirs
    }

    /// Where I/O failures take log dirs offline.
    pub fn failure_channel(&self) -> &Arc<LogDirFailureChannel> {
        &self.failures
    }

    /// Kafka's `handleLogDirFailure`: forgets the logs of a failed dir and closes them without
    /// flushing (its disk cannot be trusted); returns their partitions. Their descriptors are
    /// released once the last reader lets go.
    pub fn handle_log_dir_failure(&self, dir: &Path) -> Vec<TopicPartition> {
        let mut logs = self.logs.write();
        let failed: Vec<TopicPartition> = logs
            .iter()
            .filter(|(_, log)| log.lock().dir().parent() == Some(dir))
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &failed {
            if let Some(log) = logs.remove(tp) {
                log.lock().closed = true;
            }
        }
        self.future_logs.lock().retain(|_, log| {
            let mut log = log.lock();
            let keep = log.dir().parent() != Some(dir);
            if !keep {
                log.closed = true;
            }
            keep
        });
        self.logs_per_dir.lock().remove(dir);
        failed
    }

    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs.read().get(tp).cloned()
    }

    /// The partition's log, created in the least loaded log dir if it does not exist yet.
    /// An existing log takes `config` and, when given, the topic id.
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        topic_id: Option<[u8; 16]>,
        config: LogConfig,
    ) -> Result<SharedLog, StorageError> {
        let spec = LogSpec {
            topic_partition: tp.clone(),
            topic_id,
            config,
        };
        self.get_or_create_all(vec![spec])
            .pop()
            .expect("one result per spec")
    }

    /// The partition's log, created with `config` if it does not exist yet; an existing log
    /// keeps its own config (for a caller that knows only the broker defaults, while the
    /// metadata applier may be creating the log with its topic's configs).
    pub fn get_or_create_keeping_config(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<SharedLog, StorageError> {
        let spec = LogSpec {
            topic_partition: tp.clone(),
            topic_id: None,
            config,
        };
        self.create_missing(vec![spec], false)
            .pop()
            .expect("one result per spec")
    }

    /// `get_or_create` for many partitions, one result per spec in order. The new logs are
    /// created on up to `LOG_THREADS` threads: creating 1,000 partitions is mostly the
    /// kernel allocating inodes, which one thread does one at a time.
    pub fn get_or_create_all(&self, specs: Vec<LogSpec>) -> Vec<Result<SharedLog, StorageError>> {
        self.create_missing(specs, true)
    }

    /// Creates the logs of `specs` that do not exist; existing ones take their spec's config
    /// and topic id when `update_existing`.
    fn create_missing(
        &self,
        specs: Vec<LogSpec>,
        update_existing: bool,
    ) -> Vec<Result<SharedLog, StorageError>> {
        // One creator at a time, so two callers never open the same new directory.
        let _creating = self.creator.lock();
        let mut results: Vec<Option<Result<SharedLog, StorageError>>> = Vec::new();
        let mut pending = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            results.push(None);
            if let Some(log) = self.get(&spec.topic_partition) {
                results[index] = Some(if update_existing {
                    update_config_and_topic_id(&log, spec).map(|()| log)
                } else {
                    Ok(log)
                });
            } else if !is_valid_topic_name(&spec.topic_partition.topic)
                || spec.topic_partition.partition < 0
            {
                let name = spec.topic_partition.to_string();
                results[index] = Some(Err(StorageError::InvalidTopicName(name)));
            } else {
                pending.push((index, spec));
            }
        }
        let mut placed = Vec::new();
        for (index, spec) in pending {
            let preferred = self.preferred_dirs.lock().remove(&spec.topic_partition);
            let reserved = match preferred.filter(|d| !self.failures.is_offline(d)) {
                Some(dir) => {
                    *self.logs_per_dir.lock().entry(dir.clone()).or_default() += 1;
                    Ok(dir)
                }
                None => self.reserve_least_loaded_dir(),
            };
            match reserved {
                Ok(parent) => placed.push((index, parent, spec)),
                Err(error) => results[index] = Some(Err(error)),
            }
        }
        let now_ms = wall_clock_ms();
        // One thread, unlike loading: a new log is a handful of metadata operations that the
        // page cache absorbs, and creating a big topic on every core would stall the requests
        // served meanwhile (Kafka too creates logs on its one metadata publisher thread).
        let opened: Vec<_> = placed
            .iter()
            .map(|(_, parent, spec)| {
                Log::open(
                    &parent.join(spec.topic_partition.dir_name()),
                    spec.topic_partition.clone(),
                    spec.topic_id,
                    spec.config.clone(),
                    LoadParams::default(),
                    now_ms,
                )
            })
            .collect();
        let mut logs = self.logs.write();
        for ((index, parent, spec), log) in placed.into_iter().zip(opened) {
            results[index] = Some(match log {
                Ok(log) => {
                    let tp = spec.topic_partition;
                    info!(partition = %tp, dir = %parent.display(), "created log");
                    let log = share(log, &self.scheduler);
                    logs.insert(tp, Arc::clone(&log));
                    Ok(log)
                }
                Err(error) => {
                    // As in Kafka, a log whose creation failed is not tried in another dir.
                    if let StorageError::Io { .. } = error {
                        self.failures.maybe_add_offline_log_dir(&parent, &error);
                    }
                    self.release_dir(&parent);
                    Err(error)
                }
            });
        }
        drop(logs);
        results
            .into_iter()
            .map(|result| result.expect("every spec has a result"))
            .collect()
    }

    /// The online log dir with the fewest logs, counted as holding one more.
    fn reserve_least_loaded_dir(&self) -> Result<PathBuf, StorageError> {
        let mut counts = self.logs_per_dir.lock();
        let parent = self
            .online_log_dirs()
            .min_by_key(|d| counts.get(*d).copied().unwrap_or(0))
            .cloned()
            .ok_or(StorageError::AllLogDirsOffline)?;
        *counts.entry(parent.clone()).or_default() += 1;
        Ok(parent)
    }

    pub(crate) fn release_dir(&self, parent: &Path) {
        if let Some(count) = self.logs_per_dir.lock().get_mut(parent) {
            *count = count.saturating_sub(1);
        }
    }

    pub(crate) fn online_log_dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.log_dirs
            .iter()
            .filter(|d| !self.failures.is_offline(d))
    }

    /// Removes the partition's log and its directory; false if there was none.
    pub fn delete(&self, tp: &TopicPartition) -> Result<bool, StorageError> {
        self.remove_future_log(tp)?;
        let Some(log) = self.logs.write().remove(tp) else {
            return Ok(false);
        };
        let mut log = log.lock();
        if let Some(parent) = log.dir().parent() {
            self.release_dir(parent);
        }
        log.delete()?;
        info!(partition = %tp, "deleted log");
        Ok(true)
    }

    /// Applies new topic settings to the partition's log; false if there is no such log.
    pub fn update_config(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<bool, StorageError> {
        if let Some(future) = self.future_log(tp) {
            future.lock().update_config(config.clone())?;
        }
        match self.get(tp) {
            Some(log) => log.lock().update_config(config).map(|()| true),
            None => Ok(false),
        }
    }

    /// All partitions with a log here.
    pub fn all_partitions(&self) -> Vec<TopicPartition> {
        self.logs.read().keys().cloned().collect()
    }

    /// Flushes logs due per `flush.messages` / `flush.ms`, and rolled segments not yet
    /// fsynced (which advances the recovery point). The fsyncs run outside each log's lock.
    pub fn flush_dirty(&self, now_ms: i64) -> Result<(), StorageError> {
        let logs: Vec<SharedLog> = self.logs.read().values().cloned().collect();
        let mut first_error = None;
        for log in logs {
            let task = {
                let log = log.lock();
                if !log.needs_flush(now_ms) {
                    continue;
                }
                log.flush_task()
            };
            let Some(task) = task else { continue };
            let dir = log.lock().dir().to_path_buf();
            match task.run() {
                Ok(()) => log.lock().complete_flush(&task),
                Err(e) => {
                    warn!(dir = %dir.display(), error = %e, "flush failed");
                    if let Some(parent) = dir.parent() {
                        self.failures.maybe_add_offline_log_dir(parent, &e);
                    }
                    first_error.get_or_insert(StorageError::Io {
                        path: dir,
                        source: e,
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` per dir.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        self.write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, Log::recovery_point)?;
        self.write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, Log::log_start_offset)
    }

    /// Writes `replication-offset-checkpoint` per dir: every log's high watermark, which the
    /// next start begins from (Kafka's `checkpointHighWatermarks`).
    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        self.write_checkpoint(HIGH_WATERMARK_CHECKPOINT_FILE, Log::high_watermark)
    }

    /// Writes `file` in every online log dir with `offset` of each of the dir's logs.
    fn write_checkpoint(&self, file: &str, offset: fn(&Log) -> i64) -> Result<(), StorageError> {
        // The periodic checkpoints (on blocking threads) may still run when shutdown writes
        // its own: one writer at a time per `<file>.tmp`.
        let _writing = self.checkpoint_writer.lock();
        let mut per_dir: HashMap<PathBuf, BTreeMap<TopicPartition, i64>> = self
            .online_log_dirs()
            .map(|d| (d.clone(), BTreeMap::new()))
            .collect();
        let futures: Vec<(TopicPartition, SharedLog)> = self
            .future_logs
            .lock()
            .iter()
            .map(|(tp, log)| (tp.clone(), Arc::clone(log)))
            .collect();
        // A future log is in another dir than its current one: never the same dir's key.
        let current: Vec<(TopicPartition, SharedLog)> = self
            .logs
            .read()
            .iter()
            .map(|(tp, log)| (tp.clone(), Arc::clone(log)))
            .collect();
        for (tp, log) in current.iter().chain(&futures) {
            let log = log.lock();
            if let Some(offsets) = log.dir().parent().and_then(|p| per_dir.get_mut(p)) {
                offsets.insert(tp.clone(), offset(&log));
            }
        }
        for (dir, offsets) in per_dir {
            OffsetCheckpointFile::new(dir.join(file)).write(&offsets)?;
        }
        Ok(())
    }

    /// Flushes and closes every log (writing producer snapshots), checkpoints, and marks each
    /// log dir as cleanly shut down. The logs refuse further appends and reads.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        if let Some(mut cleaner) = self.cleaner.lock().take() {
            cleaner.shutdown();
        }
        self.scheduler.shutdown();
        // Future logs close too, so that the next start resumes their copy without recovery.
        // (Their mover has stopped: the replica manager stops it before this.)
        let futures: Vec<SharedLog> = self.future_logs.lock().values().cloned().collect();
        let mut logs: Vec<SharedLog> = self.logs.read().values().cloned().collect();
        logs.extend(futures);
        in_parallel(&logs, |log| log.lock().close())?;
        self.checkpoint()?;
        self.checkpoint_high_watermarks()?;
        // An offline dir gets no marker: the next start recovers it.
        for dir in self.online_log_dirs() {
            let marker = dir.join(CLEAN_SHUTDOWN_FILE);
            write_atomically(&marker, b"{\"version\":0,\"brokerEpoch\":-1}")
                .map_err(StorageError::io(&marker))?;
        }
        self.locks.lock().clear();
        Ok(())
    }
}

/// Loading and closing logs is mostly waiting for the disk (opening files, fsyncs) and, after
/// an unclean stop, checksumming: with 10,000 partitions, closing one log at a time took 40 s.
/// Overlapping them keeps the disk's queue and both cores busy, as Kafka does with
/// `num.recovery.threads.per.data.dir`.
const LOG_THREADS: usize = 8;

/// `work` on every item on up to `LOG_THREADS` threads: the results in item order, or the
/// first error in item order (every item is attempted).
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R, StorageError> + Sync,
) -> Result<Vec<R>, StorageError> {
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<R, StorageError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..LOG_THREADS.min(items.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut finished = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(index) else {
                            return finished;
                        };
                        finished.push((index, work(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
            .collect()
    });
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Before the logs load: removes `-delete` dirs and promotes future dirs left without a
/// current dir by a promotion the broker stopped in the middle of.
pub(crate) fn prepare_log_dirs(log_dirs: &[PathBuf]) -> Result<(), StorageError> {
    let mut current = HashSet::new();
    let mut futures = Vec::new();
    for dir in log_dirs {
        for entry in fs::read_dir(dir).map_err(StorageError::io(dir))? {
            let entry = entry.map_err(StorageError::io(dir))?;
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if suffixed_dir_partition(&name, DELETE_DIR_SUFFIX).is_some() {
                info!(dir = %path.display(), "removing a log left for deletion");
                fs::remove_dir_all(&path).map_err(StorageError::io(&path))?;
            } else if let Some(tp) = TopicPartition::from_dir_name(&name) {
                current.insert(tp);
            } else if let Some(tp) = future_dir_partition(&name) {
                futures.push((tp, dir.clone(), path));
            }
        }
    }
    for (tp, dir, path) in futures {
        if current.contains(&tp) {
            continue;
        }
        let target = dir.join(tp.dir_name());
        warn!(partition = %tp, dir = %dir.display(), "a future log has no current log (the broker stopped while promoting it): it becomes the current log");
        fs::rename(&path, &target).map_err(StorageError::io(&path))?;
        sync_dir(&dir).map_err(StorageError::io(&dir))?;
        current.insert(tp);
    }
    Ok(())
}

fn start_scheduler() -> Result<Arc<Scheduler>, StorageError> {
    Scheduler::start("krust-log-flusher")
        .map(Arc::new)
        .map_err(StorageError::io("krust-log-flusher thread"))
}

/// A loaded or created log, as the manager shares it: its rolls flush on `scheduler`.
fn share(mut log: Log, scheduler: &Arc<Scheduler>) -> SharedLog {
    log.set_scheduler(Arc::clone(scheduler));
    Arc::new(Mutex::new(log))
}

/// Creates each log dir if missing and takes its `.lock`, before anything in it is read.
fn lock_log_dirs(log_dirs: &[PathBuf]) -> Result<Vec<LogDirLock>, StorageError> {
    log_dirs
        .iter()
        .map(|dir| {
            fs::create_dir_all(dir).map_err(StorageError::io(dir))?;
            LogDirLock::acquire(dir)
        })
        .collect()
}

/// A checkpoint's entries; a malformed file is ignored with a warning saying what `fallback`
/// the logs then get.
fn read_checkpoint_or_empty(
    path: PathBuf,
    fallback: &str,
) -> Result<BTreeMap<TopicPartition, i64>, StorageError> {
    match OffsetCheckpointFile::new(&path).read() {
        Err(StorageError::Malformed { reason, .. }) => {
            warn!(path = %path.display(), %reason, "ignoring malformed checkpoint; {fallback}");
            Ok(BTreeMap::new())
        }
        other => other,
    }
}

/// What a log without a checkpointed high watermark starts with (never data lost: the records
/// stay, hidden only until the partition's leader confirms them again).
const HIGH_WATERMARK_FALLBACK: &str =
    "high watermarks start at the log start until each partition's leader moves them";

fn load_log_dir(
    dir: &Path,
    config: &LogConfig,
) -> Result<Vec<(TopicPartition, Log)>, StorageError> {
    let had_clean_shutdown = dir.join(CLEAN_SHUTDOWN_FILE).exists();
    let recovery_points = read_checkpoint_or_empty(
        dir.join(RECOVERY_POINT_CHECKPOINT_FILE),
        "logs will be fully recovered",
    )?;
    let log_starts = read_checkpoint_or_empty(
        dir.join(LOG_START_OFFSET_CHECKPOINT_FILE),
        "logs start at their first segment",
    )?;
    let high_watermarks = read_checkpoint_or_empty(
        dir.join(HIGH_WATERMARK_CHECKPOINT_FILE),
        HIGH_WATERMARK_FALLBACK,
    )?;
    let now_ms = wall_clock_ms();
    let mut partition_dirs = Vec::new();
    for entry in fs::read_dir(dir).map_err(StorageError::io(dir))? {
        let entry = entry.map_err(StorageError::io(dir))?;
        let is_dir = entry
            .file_type()
            .map_err(StorageError::io(entry.path()))?
            .is_dir();
        let Some(tp) = entry.file_name().to_str().and_then(|name| {
            TopicPartition::from_dir_name(name).or_else(|| future_dir_partition(name))
        }) else {
            continue;
        };
        if is_dir {
            partition_dirs.push((tp, entry.path()));
        }
    }
    if !partition_dirs.is_empty() && !dir.join(HIGH_WATERMARK_CHECKPOINT_FILE).exists() {
        warn!(
            dir = %dir.display(),
            "no {HIGH_WATERMARK_CHECKPOINT_FILE}; {HIGH_WATERMARK_FALLBACK}"
        );
    }
    let logs = in_parallel(&partition_dirs, |(tp, path)| {
        let params = LoadParams {
            recovery_point: recovery_points.get(tp).copied().unwrap_or(0),
            log_start_offset: log_starts.get(tp).copied().unwrap_or(0),
            had_clean_shutdown,
            high_watermark: high_watermarks.get(tp).copied().unwrap_or(0),
        };
        let log = Log::open(path, tp.clone(), None, config.clone(), params, now_ms)?;
        Ok((tp.clone(), log))
    })?;
    if !logs.is_empty() {
        if had_clean_shutdown {
            info!(dir = %dir.display(), logs = logs.len(), "loaded logs after a clean shutdown");
        } else {
            info!(
                dir = %dir.display(),
                logs = logs.len(),
                "recovered logs after an unclean shutdown (segments past the recovery point were checked)"
            );
        }
    }
    Ok(logs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::log_tests::NOW;

    fn append(manager: &LogManager, tp: &TopicPartition, count: usize) -> i64 {
        let log = manager
            .get_or_create(tp, None, LogConfig::default())
            .unwrap();
        let info = log
            .lock()
            .append_as_leader(&TestBatch::simple(count, NOW).encode(), 0, NOW)
            .unwrap();
        info.last_offset
    }

    #[test]
    fn a_caller_with_only_the_defaults_leaves_an_existing_logs_config_alone() {
        let root = tempfile::tempdir().unwrap();
        let manager = LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
        let tp = TopicPartition::new("__consumer_offsets", 0);
        let topic_config = LogConfig {
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        };
        // The metadata applier created the log with its topic's config first.
        manager
            .get_or_create(&tp, Some([7; 16]), topic_config.clone())
            .unwrap();
        let log = manager
            .get_or_create_keeping_config(&tp, LogConfig::default())
            .unwrap();
        assert_eq!(log.lock().config(), &topic_config);
        let fresh = TopicPartition::new("__consumer_offsets", 1);
        let log = manager
            .get_or_create_keeping_config(&fresh, LogConfig::default())
            .unwrap();
        assert_eq!(log.lock().config(), &LogConfig::default());
    }

    #[test]
    fn shutdown_writes_marker_and_checkpoints_and_reopen_loads_every_partition() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
        let a = TopicPartition::new("orders-eu-v2", 3);
        let b = TopicPartition::new("clicks", 0);
        append(&manager, &a, 4);
        append(&manager, &b, 2);
        // New partitions spread over the least loaded log dir.
        let parent = |tp: &TopicPartition| {
            manager
                .get(tp)
                .unwrap()
                .lock()
                .dir()
                .parent()
                .unwrap()
                .to_path_buf()
        };
        assert_ne!(parent(&a), parent(&b));
        manager.shutdown().unwrap();
        let a_dir = parent(&a);
        assert!(a_dir.join(CLEAN_SHUTDOWN_FILE).exists());
        let recovery = fs::read_to_string(a_dir.join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();
        assert_eq!(recovery, "0\n1\norders-eu-v2 3 4\n");
        let starts = fs::read_to_string(a_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE)).unwrap();
        assert_eq!(starts, "0\n1\norders-eu-v2 3 0\n");
        drop(manager);

        fs::create_dir_all(dirs[0].join("lost+found")).unwrap();
        fs::create_dir_all(dirs[0].join("clicks-0.5f3e-delete")).unwrap();
        fs::write(dirs[0].join("meta.properties"), "version=1\n").unwrap();
        let reopened = LogManager::open(&dirs, LogConfig::default()).unwrap();
        assert_eq!(reopened.all_partitions(), vec![b.clone(), a.clone()]);
        assert!(!a_dir.join(CLEAN_SHUTDOWN_FILE).exists());
        assert_eq!(reopened.get(&a).unwrap().lock().log_end_offset(), 4);
        assert_eq!(append(&reopened, &b, 1), 2);
        // A loaded log learns its topic id and config from the first get_or_create.
        let small = LogConfig {
            segment_bytes: 1000,
            ..LogConfig::default()
        };
        let log = reopened
            .get_or_create(&a, Some([1; 16]), small.clone())
            .unwrap();
        assert_eq!(log.lock().config(), &small);
        assert!(a_dir
            .join("orders-eu-v2-3")
            .join("partition.metadata")
            .exists());
        let clash = reopened.get_or_create(&a, Some([2; 16]), small);
        assert_eq!(clash.err().unwrap().kafka_error_code(), 103);
    }

    #[test]
    fn logs_and_read_plans_can_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        fn movable<T: Send>() {}
        shareable::<LogManager>();
        shareable::<SharedLog>();
        movable::<crate::fetch::ReadPlan>();
        movable::<crate::log::FlushTask>();
        let err = LogManager::open(&[], LogConfig::default()).err().unwrap();
        assert!(matches!(err, StorageError::InvalidConfig(_)));
    }

    #[test]
    fn an_unclean_stop_loses_nothing_written() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().to_path_buf()];
        let tp = TopicPartition::new("t", 1);
        {
            let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
            for _ in 0..5 {
                append(&manager, &tp, 3);
            }
        }
        let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
        assert_eq!(manager.get(&tp).unwrap().lock().log_end_offset(), 15);
    }

    #[test]
    fn delete_removes_the_partition_directory() {
        let root = tempfile::tempdir().unwrap();
        let manager = LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
        let tp = TopicPartition::new("gone", 0);
        append(&manager, &tp, 1);
        assert!(root.path().join("gone-0").exists());
        assert!(manager.delete(&tp).unwrap());
        assert!(!root.path().join("gone-0").exists());
        assert!(manager.get(&tp).is_none());
        assert!(!manager.delete(&tp).unwrap());
        let bad = TopicPartition::new("no spaces", 0);
        let err = manager
            .get_or_create(&bad, None, LogConfig::default())
            .err()
            .unwrap();
        assert_eq!(err.kafka_error_code(), 17);
    }

    #[test]
    fn flush_dirty_honours_flush_ms_and_update_config() {
        let root = tempfile::tempdir().unwrap();
        let manager = LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
        let tp = TopicPartition::new("t", 0);
        append(&manager, &tp, 3);
        let log = manager.get(&tp).unwrap();
        manager.flush_dirty(wall_clock_ms()).unwrap();
        assert_eq!(log.lock().recovery_point(), 0);
        let eager = LogConfig {
            flush_interval_ms: 0,
            ..LogConfig::default()
        };
        assert!(manager.update_config(&tp, eager).unwrap());
        manager.flush_dirty(wall_clock_ms()).unwrap();
        assert_eq!(log.lock().recovery_point(), 3);
    }
}
