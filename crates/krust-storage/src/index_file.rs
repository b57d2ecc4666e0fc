//! A memory-mapped file of fixed-size big-endian entries: the storage shared by
//! `OffsetIndex` and `TimeIndex`.
//!
//! An active segment's index is preallocated to `segment.index.bytes` (zero-filled, sparse) and
//! trimmed to its entries when the segment is rolled or closed, as Kafka does. After an unclean
//! stop a preallocated file still ends in zeros; those unused entries are not counted.
//!
//! A mapped index holds no file descriptor (Kafka closes its index files after mapping too):
//! with three descriptors a partition, 10,000 partitions would not fit a 20,000 fd limit.
//! A new segment's index files are created only when the first entry is due (Kafka's
//! `LazyIndex`): a partition with less than `index.interval.bytes` of data needs none, and
//! creating 10,000 partitions makes 20,000 fewer files.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut};

pub(crate) struct IndexFile {
    path: PathBuf,
    mmap: Option<MmapMut>,
    /// The length a not yet created file will get (its capacity meanwhile).
    pending_bytes: Option<u64>,
    entry_size: usize,
    entries: usize,
}

impl IndexFile {
    /// Opens (creating if absent) an index file; with `max_bytes` it is resized to that capacity.
    pub(crate) fn open(path: &Path, entry_size: usize, max_bytes: Option<u64>) -> io::Result<Self> {
        let file = open_read_write(path)?;
        let mut index = Self::unmapped(path, entry_size);
        index.map(&file, file.metadata()?.len())?;
        index.entries = index.count_entries_before_zero_tail();
        if let Some(max_bytes) = max_bytes {
            index.resize_file(&file, max_bytes)?;
        }
        Ok(index)
    }

    /// An empty index of `max_bytes` capacity whose file is created by `create_file`.
    pub(crate) fn deferred(path: &Path, entry_size: usize, max_bytes: u64) -> Self {
        let mut index = Self::unmapped(path, entry_size);
        index.pending_bytes = Some(index.resized_length(max_bytes));
        index
    }

    fn unmapped(path: &Path, entry_size: usize) -> Self {
        Self {
            path: path.to_path_buf(),
            mmap: None,
            pending_bytes: None,
            entry_size,
            entries: 0,
        }
    }

    /// Creates a deferred index's file at its capacity; nothing if the file exists.
    pub(crate) fn create_file(&mut self) -> io::Result<()> {
        let Some(length) = self.pending_bytes else {
            return Ok(());
        };
        let file = open_read_write(&self.path)?;
        file.set_len(length)?;
        self.map(&file, length)?;
        self.pending_bytes = None;
        Ok(())
    }

    /// Entries are written in order and none is all zeros (an offset entry's position is never
    /// 0, a time entry's timestamp practically never), so the used entries are the prefix before
    /// the zero tail. A binary search finds it touching a few pages: scanning a preallocated
    /// index would pull all of it into memory, for every partition, on each unclean restart.
    fn count_entries_before_zero_tail(&self) -> usize {
        let is_zero = |i: usize| self.entry(i).iter().all(|b| *b == 0);
        let (mut low, mut high) = (0, self.capacity());
        while low < high {
            let middle = low + (high - low) / 2;
            if is_zero(middle) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        low
    }

    fn map(&mut self, file: &File, length: u64) -> io::Result<()> {
        self.mmap = None;
        if length == 0 {
            return Ok(());
        }
        // SAFETY: the file belongs to this partition directory, which only this process opens
        // (one broker per log dir), and every resize unmaps before changing the file length,
        // so the mapping never outlives or overruns the file.
        let mmap = unsafe { MmapMut::map_mut(file)? };
        // Appends and binary searches touch single pages. Without this, each first touch of a
        // preallocated (sparse) index reads ahead a large folio that the kernel must zero:
        // 40% of the broker's time when producing to 10,000 fresh partitions.
        mmap.advise(Advice::Random)?;
        self.mmap = Some(mmap);
        Ok(())
    }

    /// The mapped length, which is the file's length (every length change remaps).
    fn mapped_bytes(&self) -> u64 {
        self.mmap.as_ref().map_or(0, |m| m.len() as u64)
    }

    /// Sets the file's capacity to `max_bytes` rounded down to whole entries (never below the
    /// entries in use).
    pub(crate) fn resize(&mut self, max_bytes: u64) -> io::Result<()> {
        if self.pending_bytes.is_some() {
            self.pending_bytes = Some(self.resized_length(max_bytes));
            return Ok(());
        }
        if self.resized_length(max_bytes) == self.mapped_bytes() {
            return Ok(());
        }
        let file = open_read_write(&self.path)?;
        self.resize_file(&file, max_bytes)
    }

    fn resized_length(&self, max_bytes: u64) -> u64 {
        let entry_size = self.entry_size as u64;
        (max_bytes / entry_size * entry_size).max(self.entries as u64 * entry_size)
    }

    fn resize_file(&mut self, file: &File, max_bytes: u64) -> io::Result<()> {
        let wanted = self.resized_length(max_bytes);
        if wanted == self.mapped_bytes() {
            return Ok(());
        }
        // Unmapping loses nothing: written entries stay in the page cache, and the log flush
        // makes them durable. (An msync here cost a disk round trip per index per resize:
        // loading 1,000 partitions spent a quarter of its time in it.)
        self.mmap = None;
        file.set_len(wanted)?;
        self.map(file, wanted)
    }

    /// Shrinks the file to exactly the entries in use (creating a deferred one: a sealed or
    /// cleanly closed segment has its index files, as Kafka's do).
    pub(crate) fn trim_to_valid_size(&mut self) -> io::Result<()> {
        let valid = (self.entries * self.entry_size) as u64;
        if self.pending_bytes.is_some() {
            self.pending_bytes = Some(valid);
            return self.create_file();
        }
        self.resize(valid)
    }

    pub(crate) fn capacity(&self) -> usize {
        let bytes = self.pending_bytes.unwrap_or_else(|| self.mapped_bytes());
        bytes as usize / self.entry_size
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.capacity()
    }

    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        let mmap = self
            .mmap
            .as_ref()
            .expect("entry index is below the capacity");
        &mmap[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Appends one entry; false when the file is full.
    pub(crate) fn push(&mut self, entry: &[u8]) -> bool {
        debug_assert_eq!(entry.len(), self.entry_size);
        // The segment creates deferred files before appending entries (`create_file` can fail,
        // this cannot); should one still be missing, the entry is dropped like a full index's.
        if self.is_full() || (self.pending_bytes.is_some() && self.create_file().is_err()) {
            return false;
        }
        let start = self.entries * self.entry_size;
        let mmap = self.mmap.as_mut().expect("a non-full index is mapped");
        mmap[start..start + self.entry_size].copy_from_slice(entry);
        self.entries += 1;
        true
    }

    /// Keeps the first `entries` entries, zeroing the rest so a later open does not count them.
    pub(crate) fn truncate_entries(&mut self, entries: usize) {
        if entries >= self.entries {
            return;
        }
        let (start, end) = (entries * self.entry_size, self.entries * self.entry_size);
        if let Some(mmap) = self.mmap.as_mut() {
            mmap[start..end].fill(0);
        }
        self.entries = entries;
    }

    /// The index of the last entry whose key is <= `target` (keys ascend), if any.
    pub(crate) fn largest_lower_bound(
        &self,
        key: impl Fn(&[u8]) -> i64,
        target: i64,
    ) -> Option<usize> {
        let (mut low, mut high) = (0, self.entries);
        while low < high {
            let middle = low + (high - low) / 2;
            if key(self.entry(middle)) <= target {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low.checked_sub(1)
    }

    /// The index of the first entry whose key is >= `target` (keys ascend), or `entries()`.
    pub(crate) fn smallest_upper_bound(&self, key: impl Fn(&[u8]) -> i64, target: i64) -> usize {
        let (mut low, mut high) = (0, self.entries);
        while low < high {
            let middle = low + (high - low) / 2;
            if key(self.entry(middle)) < target {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }

    /// Renames the file (a deferred one not created yet only changes its future name).
    pub(crate) fn rename_to(&mut self, path: &Path) -> io::Result<()> {
        if self.pending_bytes.is_none() {
            std::fs::rename(&self.path, path)?;
        }
        self.path = path.to_path_buf();
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file length a trimmed index would have; a mismatch means it was not cleanly closed.
    pub(crate) fn file_length_is_whole_entries(&self) -> bool {
        self.mapped_bytes().is_multiple_of(self.entry_size as u64)
    }
}

fn open_read_write(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

pub(crate) fn be_i32(bytes: &[u8]) -> i32 {
    i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

pub(crate) fn be_i64(bytes: &[u8]) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[..8]);
    i64::from_be_bytes(raw)
}
