//! `LeaderEpochFileCache`: which leader epoch started at which offset, persisted in the
//! partition directory's `leader-epoch-checkpoint` (format: `0`, count, `epoch startOffset`).
//! It answers OffsetForLeaderEpoch (KIP-101) and ListOffsets' leader epoch.
//!
//! A new epoch is written without fsync (as Kafka does since KAFKA-15046): the next log flush
//! fsyncs the file before the recovery point passes that epoch's offsets, and recovery derives
//! the epochs of the batches after the recovery point from the batches themselves.

use std::fs;
use std::path::{Path, PathBuf};

use crate::checkpoint::{
    format_checkpoint, read_checkpoint_entries, write_atomically, write_atomically_unsynced,
};
use crate::error::StorageError;

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// Kafka's `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// An epoch and the first offset written under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

pub struct LeaderEpochFileCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochFileCache {
    /// Loads the partition directory's checkpoint (empty when absent).
    /// The cache of a new partition, with no checkpoint file yet.
    pub fn empty(partition_dir: &Path) -> Self {
        Self {
            path: partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
            entries: Vec::new(),
        }
    }

    pub fn load(partition_dir: &Path) -> Result<Self, StorageError> {
        let path = partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let malformed = || StorageError::Malformed {
            path: path.clone(),
            reason: "unparsable epoch entry".to_string(),
        };
        // An empty file is a first, unsynced write lost to a crash (see the module comment).
        let empty = fs::metadata(&path).is_ok_and(|m| m.len() == 0);
        let stored = if empty {
            Vec::new()
        } else {
            read_checkpoint_entries(&path, 2)?
        };
        let mut entries = stored
            .into_iter()
            .map(|fields| {
                Ok(EpochEntry {
                    epoch: fields[0].parse().map_err(|_| malformed())?,
                    start_offset: fields[1].parse().map_err(|_| malformed())?,
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        entries.sort_by_key(|e| e.epoch);
        Ok(Self { path, entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the latest epoch.
    /// Entries that would contradict it (starting at or after that offset) are dropped.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), StorageError> {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return Ok(());
        }
        self.entries.retain(|e| e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.persist(false)
    }

    /// Kafka's `endOffsetFor`: the largest epoch <= `requested` and the offset where the next
    /// epoch began (the log end offset for the latest epoch).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested == UNDEFINED_EPOCH {
            return undefined;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return undefined;
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// The epoch that wrote `offset`, if known.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Drops epochs starting at or after `end_offset` (the log was cut there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), StorageError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist(true)?;
        }
        Ok(())
    }

    /// Kafka's `clearAndFlush`: forgets every epoch (the log was emptied), fsynced.
    pub fn clear_and_flush(&mut self) -> Result<(), StorageError> {
        self.entries.clear();
        self.persist(true)
    }

    /// Kafka's `truncateFromStart`: the log now starts at `start_offset`. Epochs starting
    /// below it are dropped, except the latest of them, which now starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), StorageError> {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset < start_offset)
            .count();
        let Some(latest_below) = below.checked_sub(1).map(|i| self.entries[i]) else {
            return Ok(());
        };
        self.entries.drain(..below);
        if self
            .entries
            .first()
            .is_none_or(|e| e.start_offset > start_offset)
        {
            self.entries.insert(
                0,
                EpochEntry {
                    epoch: latest_below.epoch,
                    start_offset,
                },
            );
        }
        self.persist(false)
    }

    /// The checkpoint file, for a log flush to fsync.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Truncations are synced at once: a lost one would resurrect epochs the log no longer has.
    fn persist(&self, sync: bool) -> Result<(), StorageError> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset))
            .collect();
        let text = format_checkpoint(&lines);
        let written = if sync {
            write_atomically(&self.path, text.as_bytes())
        } else {
            write_atomically_unsynced(&self.path, text.as_bytes())
        };
        written.map_err(StorageError::io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigns_new_epochs_and_persists_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochFileCache::load(dir.path()).unwrap();
        cache.assign(0, 0).unwrap();
        cache.assign(0, 5).unwrap();
        cache.assign(3, 10).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 10\n");
        let cache = LeaderEpochFileCache::load(dir.path()).unwrap();
        assert_eq!(cache.entries().len(), 2);
        assert_eq!(cache.epoch_for_offset(9), Some(0));
        assert_eq!(cache.epoch_for_offset(10), Some(3));
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochFileCache::load(dir.path()).unwrap();
        cache.assign(2, 0).unwrap();
        cache.assign(5, 40).unwrap();
        assert_eq!(cache.end_offset_for(5, 99), (5, 99));
        assert_eq!(cache.end_offset_for(3, 99), (2, 40));
        assert_eq!(cache.end_offset_for(1, 99), (1, 0));
        assert_eq!(cache.end_offset_for(7, 99), (-1, -1));
        cache.truncate_from_end(40).unwrap();
        assert_eq!(cache.latest_epoch(), Some(2));
    }

    #[test]
    fn truncate_from_start_keeps_the_epoch_holding_the_new_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochFileCache::load(dir.path()).unwrap();
        cache.assign(1, 0).unwrap();
        cache.assign(2, 10).unwrap();
        cache.assign(4, 20).unwrap();
        cache.truncate_from_start(5).unwrap();
        let starts = |c: &LeaderEpochFileCache| {
            c.entries()
                .iter()
                .map(|e| (e.epoch, e.start_offset))
                .collect::<Vec<_>>()
        };
        assert_eq!(starts(&cache), vec![(1, 5), (2, 10), (4, 20)]);
        cache.truncate_from_start(20).unwrap();
        assert_eq!(starts(&cache), vec![(4, 20)]);
        cache.truncate_from_start(25).unwrap();
        assert_eq!(starts(&cache), vec![(4, 25)]);
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n1\n4 25\n");
    }
}
