//! `OffsetIndex`: a sparse map from offset to file position within one segment.
//!
//! Entries are 8 bytes: the offset relative to the segment's base offset (i32) and the byte
//! position of a batch in the `.log` file (i32), both big-endian. As in Kafka, an entry names the
//! *last* offset of the batch that starts at the position, and one is written every
//! `index.interval.bytes`, so a lookup gives a position to scan forward from.

use std::io;
use std::path::Path;

use crate::index_file::{be_i32, IndexFile};

const ENTRY_SIZE: usize = 8;

/// An offset and the file position of the batch it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
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

    pub fn entry(&self, i: usize) -> OffsetPosition {
        let raw = self.file.entry(i);
        OffsetPosition {
            offset: self.base_offset + i64::from(be_i32(&raw[..4])),
            position: be_i32(&raw[4..]) as u32,
        }
    }

    /// The last entry, or (base offset, 0) when empty.
    pub fn last_entry(&self) -> OffsetPosition {
        match self.entries() {
            0 => self.start(),
            n => self.entry(n - 1),
        }
    }

    fn start(&self) -> OffsetPosition {
        OffsetPosition {
            offset: self.base_offset,
            position: 0,
        }
    }

    /// Appends an entry if it keeps offsets strictly ascending and the index has room.
    pub fn append(&mut self, offset: i64, position: u32) -> bool {
        let relative = offset - self.base_offset;
        let ascending = self.entries() == 0 || offset > self.last_entry().offset;
        if !ascending || relative < 0 || relative > i64::from(i32::MAX) {
            return false;
        }
        let mut raw = [0u8; ENTRY_SIZE];
        raw[..4].copy_from_slice(&(relative as i32).to_be_bytes());
        raw[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&raw)
    }

    /// The entry with the largest offset <= `target`, or (base offset, 0).
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let relative = |raw: &[u8]| i64::from(be_i32(&raw[..4]));
        match self
            .file
            .largest_lower_bound(relative, target - self.base_offset)
        {
            Some(i) => self.entry(i),
            None => self.start(),
        }
    }

    /// Removes every entry with an offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let relative = |raw: &[u8]| i64::from(be_i32(&raw[..4]));
        let keep = self
            .file
            .smallest_upper_bound(relative, offset - self.base_offset);
        self.file.truncate_entries(keep);
    }

    /// Kafka's load-time check: whole entries, and the last offset not below the base.
    pub fn sanity_check(&self) -> bool {
        let last_ok = self.entries() == 0 || self.last_entry().offset > self.base_offset;
        last_ok && self.file.file_length_is_whole_entries()
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

    fn index(dir: &tempfile::TempDir, base: i64, max: u64) -> OffsetIndex {
        OffsetIndex::open(&dir.path().join("0.index"), base, Some(max)).unwrap()
    }

    #[test]
    fn lookup_before_first_entry_gives_segment_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = index(&dir, 100, 80);
        assert_eq!(
            idx.lookup(150),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert!(idx.append(110, 4096));
        assert_eq!(
            idx.lookup(109),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(110),
            OffsetPosition {
                offset: 110,
                position: 4096
            }
        );
    }

    #[test]
    fn fills_up_and_refuses_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = index(&dir, 0, 20);
        assert!(idx.append(5, 10));
        assert!(!idx.append(5, 20));
        assert!(idx.append(6, 20));
        assert!(idx.is_full());
        assert!(!idx.append(7, 30));
    }

    #[test]
    fn trimmed_file_reopens_with_its_entries_and_preallocated_one_ignores_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        {
            let mut idx = OffsetIndex::open(&path, 0, Some(1024)).unwrap();
            idx.append(3, 100);
            idx.append(9, 200);
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1024);
        let mut idx = OffsetIndex::open(&path, 0, None).unwrap();
        assert_eq!(idx.entries(), 2);
        idx.file().trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        assert!(idx.sanity_check());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn reopening_a_preallocated_index_counts_exactly_its_entries(
            written in 0usize..300,
            capacity in 300u64..2000,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("0.index");
            {
                let mut idx = OffsetIndex::open(&path, 0, Some(capacity * 8)).unwrap();
                for i in 0..written {
                    prop_assert!(idx.append(i as i64 + 1, (i as u32 + 1) * 64));
                }
            }
            let idx = OffsetIndex::open(&path, 0, None).unwrap();
            prop_assert_eq!(idx.entries(), written);
            if written > 0 {
                prop_assert_eq!(idx.last_entry().offset, written as i64);
            }
        }

        #[test]
        fn lookup_agrees_with_brute_force(
            gaps in proptest::collection::vec(1i64..50, 0..60),
            targets in proptest::collection::vec(0i64..3000, 1..30),
            truncate_at in 0i64..3000,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let base = 1000;
            let mut idx = index(&dir, base, 8 * 64);
            let mut model = Vec::new();
            let mut offset = base;
            for (i, gap) in gaps.iter().enumerate() {
                offset += gap;
                prop_assert!(idx.append(offset, (i as u32 + 1) * 100));
                model.push(OffsetPosition { offset, position: (i as u32 + 1) * 100 });
            }
            let check = |idx: &OffsetIndex, model: &[OffsetPosition]| {
                for t in &targets {
                    let target = base + t - 100;
                    let expected = model.iter().rev().find(|e| e.offset <= target).copied()
                        .unwrap_or(OffsetPosition { offset: base, position: 0 });
                    assert_eq!(idx.lookup(target), expected);
                }
            };
            check(&idx, &model);
            idx.truncate_to(base + truncate_at);
            model.retain(|e| e.offset < base + truncate_at);
            prop_assert_eq!(idx.entries(), model.len());
            check(&idx, &model);
        }
    }
}
