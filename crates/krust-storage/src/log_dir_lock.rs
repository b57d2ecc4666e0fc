//! The `.lock` file Kafka holds in every log dir for as long as the broker runs, so a second
//! broker (or a second `LogManager`) pointed at the same directory refuses to start instead of
//! writing into the same segments.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::error::StorageError;

/// Kafka's lock file name (`LogManager.LockFileName`).
pub const LOCK_FILE: &str = ".lock";

/// An exclusive `flock` on `<log dir>/.lock`, released when dropped (or when the process
/// dies: the kernel drops the lock with the descriptor).
#[derive(Debug)]
pub struct LogDirLock {
    _file: File,
}

impl LogDirLock {
    /// Locks `dir` (which must exist) without waiting.
    pub fn acquire(dir: &Path) -> Result<Self, StorageError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(StorageError::io(&path))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Self { _file: file }),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(StorageError::LogDirLocked {
                dir: PathBuf::from(dir),
            }),
            Err(e) => Err(StorageError::io(&path)(io::Error::from(e))),
        }
    }
}
