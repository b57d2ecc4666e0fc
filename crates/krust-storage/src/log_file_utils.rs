//! Kafka's `LogFileUtils`: the names of a log's files (`<20-digit offset><suffix>`, the
//! `.deleted` mark) and removing one. A leaf that segments, indexes and producer snapshots all
//! name their files with.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// `<dir>/<20-digit offset><suffix>`.
pub fn offset_file_path(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{offset:020}{suffix}"))
}

/// Kafka's suffix of a file awaiting deletion (`<base>.log.deleted`, ...).
pub const DELETED_FILE_SUFFIX: &str = ".deleted";

/// A segment the cleaner wrote, before it is swapped in.
pub(crate) const CLEANED_FILE_SUFFIX: &str = ".cleaned";
/// A cleaned segment being swapped in for the segments it replaces.
pub(crate) const SWAP_FILE_SUFFIX: &str = ".swap";

/// `path` with `.deleted` appended.
pub(crate) fn deleted_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(DELETED_FILE_SUFFIX);
    PathBuf::from(name)
}

/// The offset encoded in a Kafka-style file name with the given suffix, if it is one.
pub fn parse_offset_file_name(name: &str, suffix: &str) -> Option<i64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Makes the renames and removals in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes a file; one already gone is fine.
pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
