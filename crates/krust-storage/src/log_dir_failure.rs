//! `LogDirFailureChannel`: the log dirs that failed (an I/O error in any log operation), as in
//! Kafka. A failed dir stays offline until restart: its partitions answer KAFKA_STORAGE_ERROR
//! and it gets no clean-shutdown marker, so the next start recovers it.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};

use parking_lot::{Mutex, RwLock};
use tracing::error;

/// Records offline log dirs and queues each newly failed one for the broker's handler.
pub struct LogDirFailureChannel {
    offline: RwLock<Vec<PathBuf>>,
    /// Lets the request path skip the lock while every dir is online.
    any_offline: AtomicBool,
    queue: Mutex<Sender<PathBuf>>,
    receiver: Mutex<Option<Receiver<PathBuf>>>,
}

impl Default for LogDirFailureChannel {
    fn default() -> Self {
        let (sender, receiver) = channel();
        LogDirFailureChannel {
            offline: RwLock::default(),
            any_offline: AtomicBool::new(false),
            queue: Mutex::new(sender),
            receiver: Mutex::new(Some(receiver)),
        }
    }
}

impl LogDirFailureChannel {
    /// Marks `dir` offline after `cause`; logs and queues it only the first time (online to
    /// offline), so a full disk is reported once, not once per request. True if newly offline.
    pub fn maybe_add_offline_log_dir(&self, dir: &Path, cause: &dyn Display) -> bool {
        let mut offline = self.offline.write();
        if offline.iter().any(|d| d == dir) {
            return false;
        }
        offline.push(dir.to_path_buf());
        self.any_offline.store(true, Ordering::Release);
        error!(
            dir = %dir.display(),
            error = %cause,
            "log dir is offline: its partitions answer KAFKA_STORAGE_ERROR until the broker restarts"
        );
        // The handler may be gone (the broker is closing); the dir is offline regardless.
        let _ = self.queue.lock().send(dir.to_path_buf());
        true
    }

    pub fn is_offline(&self, dir: &Path) -> bool {
        self.any_offline.load(Ordering::Acquire) && self.offline.read().iter().any(|d| d == dir)
    }

    pub fn offline_dirs(&self) -> Vec<PathBuf> {
        self.offline.read().clone()
    }

    /// The queue of newly failed dirs, for the one handler that reacts to them.
    pub fn take_receiver(&self) -> Option<Receiver<PathBuf>> {
        self.receiver.lock().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_goes_offline_once_and_is_queued_once() {
        let channel = LogDirFailureChannel::default();
        let receiver = channel.take_receiver().unwrap();
        let dir = Path::new("/data/a");
        assert!(!channel.is_offline(dir));
        assert!(channel.maybe_add_offline_log_dir(dir, &"disk full"));
        assert!(!channel.maybe_add_offline_log_dir(dir, &"disk full"));
        assert!(channel.is_offline(dir));
        assert!(!channel.is_offline(Path::new("/data/b")));
        assert_eq!(receiver.try_recv().unwrap(), dir);
        assert!(receiver.try_recv().is_err());
        assert!(channel.take_receiver().is_none());
    }

    #[test]
    fn a_failed_dir_loses_its_logs_new_logs_and_the_clean_marker() {
        use crate::batch::test_batches::TestBatch;
        use crate::config::LogConfig;
        use crate::log_manager::{LogManager, CLEAN_SHUTDOWN_FILE};
        use crate::topic_partition::TopicPartition;

        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
        let (a, b) = (TopicPartition::new("a", 0), TopicPartition::new("b", 0));
        let log_a = manager
            .get_or_create(&a, None, LogConfig::default())
            .unwrap();
        manager
            .get_or_create(&b, None, LogConfig::default())
            .unwrap();
        let failed = log_a.lock().dir().parent().unwrap().to_path_buf();
        let channel = manager.failure_channel();
        assert!(channel.maybe_add_offline_log_dir(&failed, &"disk full"));
        assert_eq!(manager.handle_log_dir_failure(&failed), vec![a.clone()]);
        assert!(manager.get(&a).is_none());
        let batch = TestBatch::simple(1, 0).encode();
        assert!(log_a.lock().append_as_leader(&batch, 0, 0).is_err());

        let c = TopicPartition::new("c", 0);
        let log_c = manager
            .get_or_create(&c, None, LogConfig::default())
            .unwrap();
        assert_ne!(log_c.lock().dir().parent().unwrap(), failed);
        manager.shutdown().unwrap();
        assert!(!failed.join(CLEAN_SHUTDOWN_FILE).exists());
        let online = dirs.iter().find(|d| **d != failed).unwrap();
        assert!(online.join(CLEAN_SHUTDOWN_FILE).exists());
    }

    #[test]
    fn no_log_is_created_once_every_dir_is_offline() {
        use crate::config::LogConfig;
        use crate::error::StorageError;
        use crate::log_manager::LogManager;
        use crate::topic_partition::TopicPartition;

        let root = tempfile::tempdir().unwrap();
        let manager = LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
        manager
            .failure_channel()
            .maybe_add_offline_log_dir(root.path(), &"disk full");
        let tp = TopicPartition::new("t", 0);
        let error = manager.get_or_create(&tp, None, LogConfig::default()).err();
        assert!(matches!(error, Some(StorageError::AllLogDirsOffline)));
    }
}
