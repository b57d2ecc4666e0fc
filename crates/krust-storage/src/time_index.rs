//! `TimeIndex`: a sparse map from timestamp to offset within one segment.
//!
//! Entries are 12 bytes: a timestamp (i64) and an offset relative to the segment's base (i32),
//! big-endian. Timestamps strictly ascend: an entry is only added when the segment's maximum
//! timestamp grew, so a lookup gives the last offset known to precede a target time.

use std::io;
use std::path::Path;

use crate::batch::NO_TIMESTAMP;
use crate::index_file::{be_i32, be_i64, IndexFile};

const ENTRY_SIZE: usize = 12;

/// A timestamp and the offset of the batch that carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    /// Opens or creates the index; `max_bytes` preallocates it for appends.
    pub fn open(path: &Path, base_offset: i64, max_bytes: Option<u64>) -> io::Result<Self> {
        Ok(Self {
            base_offset,
            file: IndexFile::open(path, ENTRY_SIZE, max_bytes)?,
        })
    }

    /// A new, empty index whose file is created when the first entry is due.
    pub fn deferred(path: &Path, base_offset: i64, max_bytes: u64) -> Self {
        Self {
            base_offset,
            file: IndexFile::deferred(path, ENTRY_SIZE, max_bytes),
        }
    }

    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    pub fn entry(&self, i: usize) -> TimestampOffset {
        let raw = self.file.entry(i);
        TimestampOffset {
            timestamp: be_i64(&raw[..8]),
            offset: self.base_offset + i64::from(be_i32(&raw[8..])),
        }
    }

    /// The last entry, or (NO_TIMESTAMP, base offset) when empty.
    pub fn last_entry(&self) -> TimestampOffset {
        match self.entries() {
            0 => self.start(),
            n => self.entry(n - 1),
        }
    }

    fn start(&self) -> TimestampOffset {
        TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        }
    }

    /// Adds an entry when `timestamp` is above the last one and the index has room.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> bool {
        let relative = offset - self.base_offset;
        if relative < 0 || relative > i64::from(i32::MAX) {
            return false;
        }
        if self.entries() > 0 {
            let last = self.last_entry();
            if timestamp <= last.timestamp || offset < last.offset {
                return false;
            }
        }
        let mut raw = [0u8; ENTRY_SIZE];
        raw[..8].copy_from_slice(&timestamp.to_be_bytes());
        raw[8..].copy_from_slice(&(relative as i32).to_be_bytes());
        self.file.push(&raw)
    }

    /// The entry with the largest timestamp <= `target`, or (NO_TIMESTAMP, base offset).
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        match self
            .file
            .largest_lower_bound(|raw| be_i64(&raw[..8]), target)
        {
            Some(i) => self.entry(i),
            None => self.start(),
        }
    }

    /// Removes every entry with an offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let relative = |raw: &[u8]| i64::from(be_i32(&raw[8..]));
        let keep = self
            .file
            .smallest_upper_bound(relative, offset - self.base_offset);
        self.file.truncate_entries(keep);
    }

    /// Kafka's load-time check: whole entries, ascending ends, no offset below the base.
    pub fn sanity_check(&self) -> bool {
        let ordered = match self.entries() {
            0 => true,
            n => self.entry(n - 1).timestamp >= self.entry(0).timestamp,
        };
        let last_ok = self.last_entry().offset >= self.base_offset;
        ordered && last_ok && self.file.file_length_is_whole_entries()
    }

    pub(crate) fn file(&mut self) -> &mut IndexFile {
        &mut self.file
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_growing_timestamps_are_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::open(&dir.path().join("0.timeindex"), 50, Some(120)).unwrap();
        assert_eq!(
            idx.lookup(10),
            TimestampOffset {
                timestamp: -1,
                offset: 50
            }
        );
        assert!(idx.maybe_append(1000, 55));
        assert!(!idx.maybe_append(1000, 56));
        assert!(!idx.maybe_append(900, 57));
        assert!(idx.maybe_append(2000, 60));
        assert_eq!(
            idx.lookup(1999),
            TimestampOffset {
                timestamp: 1000,
                offset: 55
            }
        );
        assert_eq!(
            idx.lookup(2000),
            TimestampOffset {
                timestamp: 2000,
                offset: 60
            }
        );
        idx.truncate_to(60);
        assert_eq!(idx.entries(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn lookup_agrees_with_brute_force(
            steps in proptest::collection::vec((1i64..100, 0i64..5), 0..60),
            targets in proptest::collection::vec(0i64..7000, 1..30),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let base = 10;
            let mut idx = TimeIndex::open(&dir.path().join("0.timeindex"), base, Some(12 * 80)).unwrap();
            let mut model = Vec::new();
            let (mut ts, mut offset) = (0, base);
            for (dt, doff) in steps {
                ts += dt;
                offset += doff;
                prop_assert!(idx.maybe_append(ts, offset));
                model.push(TimestampOffset { timestamp: ts, offset });
            }
            for target in targets {
                let expected = model.iter().rev().find(|e| e.timestamp <= target).copied()
                    .unwrap_or(TimestampOffset { timestamp: -1, offset: base });
                prop_assert_eq!(idx.lookup(target), expected);
            }
        }
    }
}
