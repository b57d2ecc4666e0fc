//! `TransactionIndex`: a segment's `.txnindex`, the aborted transactions whose ABORT marker
//! lies in the segment (KIP-98), so a read_committed fetch can tell its consumer which records
//! to skip.
//!
//! Kafka's layout: fixed 34-byte entries, each version i16 (0) | producerId i64 |
//! firstOffset i64 | lastOffset i64 | lastStableOffset i64, big-endian, in marker order. The
//! file is created with its first entry; the entries are also kept in memory (a segment
//! holds few aborted transactions).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::log_file_utils::remove_if_present;

pub const TXN_INDEX_FILE_SUFFIX: &str = ".txnindex";

const ENTRY_SIZE: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction: its producer and offsets, and the last stable offset when its
/// marker was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The ABORT marker's offset.
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// An aborted transaction as a fetch response lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

impl AbortedTxnEntry {
    fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Result<Self, String> {
        let i64_at = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&raw[at..at + 8]);
            i64::from_be_bytes(bytes)
        };
        let version = i16::from_be_bytes([raw[0], raw[1]]);
        if version != VERSION {
            return Err(format!("unknown entry version {version}"));
        }
        let entry = Self {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        };
        if entry.producer_id < 0 || entry.first_offset < 0 || entry.last_offset < entry.first_offset
        {
            return Err(format!("impossible entry {entry:?}"));
        }
        Ok(entry)
    }
}

/// What a search of one index found (Kafka's `TxnIndexSearchResult`).
pub(crate) struct TxnIndexSearch {
    pub aborted: Vec<AbortedTxn>,
    /// An entry's last stable offset reached the upper bound: no later entry can matter.
    pub complete: bool,
}

pub(crate) struct TransactionIndex {
    path: PathBuf,
    entries: Vec<AbortedTxnEntry>,
    /// Why the file on disk could not be read; the segment's recovery rebuilds it.
    corruption: Option<String>,
}

impl TransactionIndex {
    /// A segment's index at `path`, read if the file exists. A file that is not whole entries
    /// of version 0 with offsets in order is reported by `corruption()`, not an error.
    pub(crate) fn open(path: PathBuf) -> io::Result<Self> {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut index = Self {
            path,
            entries: Vec::new(),
            corruption: None,
        };
        if bytes.len() % ENTRY_SIZE != 0 {
            index.corruption = Some(format!(
                "its size {} is not a multiple of {ENTRY_SIZE}",
                bytes.len()
            ));
            return Ok(index);
        }
        for raw in bytes.chunks_exact(ENTRY_SIZE) {
            let entry = AbortedTxnEntry::decode(raw).and_then(|entry| match index.entries.last() {
                Some(last) if entry.last_offset <= last.last_offset => {
                    Err(format!("entry {entry:?} is out of order"))
                }
                _ => Ok(entry),
            });
            match entry {
                Ok(entry) => index.entries.push(entry),
                Err(reason) => {
                    index.corruption = Some(reason);
                    index.entries.clear();
                    break;
                }
            }
        }
        Ok(index)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Why the file read at open was unusable (Kafka's failed `sanityCheck`).
    pub(crate) fn corruption(&self) -> Option<&str> {
        self.corruption.as_deref()
    }

    pub(crate) fn entries(&self) -> &[AbortedTxnEntry] {
        &self.entries
    }

    /// Appends an entry; markers come in offset order.
    pub(crate) fn append(&mut self, entry: AbortedTxnEntry) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            if entry.last_offset <= last.last_offset {
                return Err(io::Error::other(format!(
                    "aborted transaction {entry:?} does not follow {last:?} in {}",
                    self.path.display()
                )));
            }
        }
        let file = self.file()?;
        let position = (self.entries.len() * ENTRY_SIZE) as u64;
        file.write_all_at(&entry.encode(), position)?;
        self.entries.push(entry);
        Ok(())
    }

    fn file(&self) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
    }

    /// Forgets the entries whose marker is at or after `offset` (Kafka's `truncateTo`).
    pub(crate) fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .iter()
            .take_while(|e| e.last_offset < offset)
            .count();
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.file()?.set_len((keep * ENTRY_SIZE) as u64)
    }

    /// Empties the index (a segment recovered from its first byte), deleting the file.
    pub(crate) fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.corruption = None;
        remove_if_present(&self.path)
    }

    /// The aborted transactions overlapping [`fetch_offset`, `upper_bound`) (Kafka's
    /// `collectAbortedTxns`).
    pub(crate) fn collect(&self, fetch_offset: i64, upper_bound: i64) -> TxnIndexSearch {
        let mut aborted = Vec::new();
        for entry in &self.entries {
            if entry.last_offset >= fetch_offset && entry.first_offset < upper_bound {
                aborted.push(AbortedTxn {
                    producer_id: entry.producer_id,
                    first_offset: entry.first_offset,
                });
            }
            if entry.last_stable_offset >= upper_bound {
                return TxnIndexSearch {
                    aborted,
                    complete: true,
                };
            }
        }
        TxnIndexSearch {
            aborted,
            complete: false,
        }
    }

    /// Renames the file (if there is one) to `path`.
    pub(crate) fn rename_to(&mut self, path: PathBuf) -> io::Result<()> {
        match std::fs::rename(&self.path, &path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.path = path;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxnEntry {
        AbortedTxnEntry {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entries_persist_in_kafkas_layout_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut index = TransactionIndex::open(path.clone()).unwrap();
        assert!(!path.exists(), "created with the first entry");
        index.append(entry(1, 0, 5, 6)).unwrap();
        index.append(entry(2, 3, 9, 10)).unwrap();
        assert!(index.append(entry(3, 4, 8, 10)).is_err());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 68);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &1i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &6i64.to_be_bytes());
        let reopened = TransactionIndex::open(path.clone()).unwrap();
        assert_eq!(reopened.entries(), index.entries());
        index.truncate_to(9).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        assert_eq!(TransactionIndex::open(path).unwrap().entries().len(), 1);
    }

    #[test]
    fn collect_stops_at_an_entry_whose_last_stable_offset_reaches_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TransactionIndex::open(dir.path().join("x.txnindex")).unwrap();
        index.append(entry(1, 0, 5, 2)).unwrap();
        index.append(entry(2, 2, 9, 20)).unwrap();
        index.append(entry(3, 12, 25, 26)).unwrap();
        let found = index.collect(6, 15);
        assert!(found.complete);
        let pids: Vec<i64> = found.aborted.iter().map(|a| a.producer_id).collect();
        assert_eq!(pids, vec![2]);
        let open_ended = index.collect(0, 30);
        assert!(!open_ended.complete);
        assert_eq!(open_ended.aborted.len(), 3);
    }

    #[test]
    fn a_garbled_file_is_reported_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.txnindex");
        std::fs::write(&path, [7u8; 40]).unwrap();
        let index = TransactionIndex::open(path.clone()).unwrap();
        assert!(index.corruption().unwrap().contains("multiple of 34"));
        let mut forged = entry(1, 10, 5, 11).encode().to_vec();
        forged.extend_from_slice(&entry(1, 0, 5, 6).encode());
        std::fs::write(&path, &forged).unwrap();
        let index = TransactionIndex::open(path.clone()).unwrap();
        assert!(index.corruption().is_some() && index.entries().is_empty());
        let mut wrong_version = entry(1, 0, 5, 6).encode();
        wrong_version[1] = 9;
        std::fs::write(&path, wrong_version).unwrap();
        assert!(TransactionIndex::open(path).unwrap().corruption().is_some());
    }
}
