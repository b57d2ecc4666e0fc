//! The log cleaner (Kafka's `LogCleaner`): background threads that compact logs whose
//! `cleanup.policy` includes `compact`, keeping the latest record of each key and removing
//! tombstones once `delete.retention.ms` has passed (docs/log-cleaner.md).
//!
//! - [`manager`]: which log to clean next, and the `cleaner-offset-checkpoint` files.
//! - [`clean`]: one clean: the offset map over the dirty section, then the rewrite.
//! - [`offset_map`]: the bounded key-hash to offset map (`log.cleaner.dedupe.buffer.size`).
//! - [`filter`]: what one batch keeps.
//! - [`swap`]: the crash-safe `.cleaned` / `.swap` replacement, and its recovery at load.

pub(crate) mod clean;
pub(crate) mod filter;
pub(crate) mod manager;
pub mod offset_map;
pub(crate) mod swap;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

pub use clean::{CleanError, CleanStats};
pub use manager::{CleanerStatus, CLEANER_OFFSET_CHECKPOINT_FILE};

use crate::cleaner::clean::{clean_log, Throttler};
use crate::cleaner::manager::CleanerManager;
use crate::cleaner::offset_map::OffsetMap;
use crate::log::wall_clock_ms;
use crate::log::SharedLog;
use crate::log_dir_failure::LogDirFailureChannel;
use crate::topic_partition::TopicPartition;

krust_config::config_settings! {
    /// The broker's `log.cleaner.*` settings.
    #[derive(Clone, Debug, PartialEq)]
    pub struct CleanerConfig {
        pub enable: bool = "log.cleaner.enable",
        pub threads: usize = "log.cleaner.threads",
        /// The offset maps' memory, shared by the threads.
        pub dedupe_buffer_size: u64 = "log.cleaner.dedupe.buffer.size",
        /// The pause when no log needs cleaning.
        pub backoff_ms: u64 = "log.cleaner.backoff.ms",
        /// The cleaner's read plus write rate.
        pub io_max_bytes_per_second: f64 = "log.cleaner.io.max.bytes.per.second",
    }
}

/// The running cleaner threads.
pub struct LogCleaner {
    manager: Arc<CleanerManager>,
    failures: Arc<LogDirFailureChannel>,
    config: CleanerConfig,
    threads: Threads,
}

/// One generation of cleaner threads: what stops them, and their handles.
struct Threads {
    stop: Arc<(Mutex<bool>, Condvar)>,
    abort: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Threads {
    /// Starts `config.threads` threads (at least one) over `manager`'s logs.
    fn start(
        config: &CleanerConfig,
        manager: &Arc<CleanerManager>,
        failures: &Arc<LogDirFailureChannel>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let abort = Arc::new(AtomicBool::new(false));
        let threads = config.threads.max(1);
        let map_bytes = usize::try_from(config.dedupe_buffer_size / threads as u64)
            .unwrap_or(usize::MAX)
            .min(i32::MAX as usize);
        let mut started = Threads {
            stop,
            abort,
            handles: Vec::with_capacity(threads),
        };
        for i in 0..threads {
            let worker = Worker {
                manager: Arc::clone(manager),
                stop: Arc::clone(&started.stop),
                abort: Arc::clone(&started.abort),
                map_bytes,
                failures: Arc::clone(failures),
                backoff: Duration::from_millis(config.backoff_ms),
                io_max_bytes_per_second: config.io_max_bytes_per_second,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("kafka-log-cleaner-thread-{i}"))
                .spawn(move || worker.run());
            match spawned {
                Ok(handle) => started.handles.push(handle),
                Err(error) => {
                    started.stop();
                    return Err(error);
                }
            }
        }
        Ok(started)
    }

    /// Stops and joins the threads; a clean in progress is abandoned, leaving the log as it was.
    fn stop(&mut self) {
        self.abort.store(true, Ordering::Release);
        let (stopped, wake) = &*self.stop;
        *stopped.lock() = true;
        wake.notify_all();
        for thread in self.handles.drain(..) {
            let _ = thread.join();
        }
    }
}

impl LogCleaner {
    /// Starts `config.threads` threads cleaning the logs in `logs`.
    pub(crate) fn start(
        config: &CleanerConfig,
        log_dirs: &[PathBuf],
        logs: Arc<RwLock<BTreeMap<TopicPartition, SharedLog>>>,
        failures: Arc<LogDirFailureChannel>,
    ) -> std::io::Result<Self> {
        let manager = Arc::new(CleanerManager::new(log_dirs, logs));
        let threads = Threads::start(config, &manager, &failures)?;
        Ok(Self {
            manager,
            failures,
            config: config.clone(),
            threads,
        })
    }

    /// Keeps the partition's log from being cleaned until `resume`; false (nothing paused)
    /// while it is being cleaned.
    pub(crate) fn pause_unless_cleaning(&self, tp: &TopicPartition) -> bool {
        self.manager.pause_unless_cleaning(tp)
    }

    pub(crate) fn resume(&self, tp: &TopicPartition) {
        self.manager.resume(tp);
    }

    /// The partition's log moved from log dir `from` to `to`: so does its checkpoint.
    pub(crate) fn move_checkpoint(&self, tp: &TopicPartition, from: &Path, to: &Path) {
        self.manager.move_checkpoint(tp, from, to);
    }

    /// The backlog and the last clean.
    pub fn status(&self) -> CleanerStatus {
        self.manager.status()
    }

    /// Kafka's `LogCleaner.reconfigure`: the threads stop (a clean in progress is abandoned
    /// and done again later) and as many as `config.threads` start with the new settings;
    /// the backlog, the uncleanable partitions and the checkpoints stay.
    pub(crate) fn reconfigure(&mut self, config: &CleanerConfig) -> std::io::Result<()> {
        if *config == self.config {
            return Ok(());
        }
        self.threads.stop();
        self.threads = Threads::start(config, &self.manager, &self.failures)?;
        self.config = config.clone();
        Ok(())
    }

    /// Stops the threads; a clean in progress is abandoned, leaving the log as it was.
    pub fn shutdown(&mut self) {
        self.threads.stop();
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Worker {
    manager: Arc<CleanerManager>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    abort: Arc<AtomicBool>,
    map_bytes: usize,
    /// An I/O error while cleaning takes the log's dir offline, as in Kafka.
    failures: Arc<LogDirFailureChannel>,
    backoff: Duration,
    io_max_bytes_per_second: f64,
}

impl Worker {
    fn run(self) {
        loop {
            let now_ms = wall_clock_ms();
            match self.manager.grab_filthiest(now_ms) {
                Some((log, to_clean)) => {
                    // Zeroed memory: only the pages the map reaches become resident.
                    let mut map = OffsetMap::new(self.map_bytes);
                    let mut throttler = Throttler::new(self.io_max_bytes_per_second, &self.abort);
                    let result = clean_log(&log, &to_clean, &mut map, &mut throttler, now_ms);
                    if let Err(CleanError::Io { source, .. }) = &result {
                        if let Some(log_dir) = log.lock().dir().parent() {
                            self.failures.maybe_add_offline_log_dir(log_dir, source);
                        }
                    }
                    self.manager.done(&to_clean, result);
                }
                None => {
                    let (stopped, wake) = &*self.stop;
                    let mut stopped = stopped.lock();
                    if !*stopped {
                        wake.wait_for(&mut stopped, self.backoff);
                    }
                }
            }
            if *self.stop.0.lock() {
                return;
            }
        }
    }
}
