//! Kafka's checkpoint text files, written atomically (`<file>.tmp`, fsync, rename).
//!
//! Format: a version line `0`, a count line, then one entry per line with space-separated
//! fields: `topic partition offset` for `recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint` and `replication-offset-checkpoint` (the high watermarks),
//! `epoch startOffset` for `leader-epoch-checkpoint`.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::StorageError;
use crate::topic_partition::TopicPartition;

pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
/// Kafka's ReplicaManager.HighWatermarkFilename.
pub const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
const CHECKPOINT_VERSION: &str = "0";

/// Replaces `path` with `contents` so that a crash leaves either the old or the new file.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_file(path, ".tmp", contents, true)
}

/// `write_atomically` through a temporary file named with `temp_suffix` (Kafka's snapshots
/// use `.part`, which their loaders know to remove).
pub(crate) fn write_atomically_via(
    path: &Path,
    temp_suffix: &str,
    contents: &[u8],
) -> io::Result<()> {
    replace_file(path, temp_suffix, contents, true)
}

/// The same replacement without fsyncs, for a file that the next log flush makes durable.
pub(crate) fn write_atomically_unsynced(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_file(path, ".tmp", contents, false)
}

fn replace_file(path: &Path, temp_suffix: &str, contents: &[u8], sync: bool) -> io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(temp_suffix);
    let tmp = PathBuf::from(tmp_name);
    {
        let mut file = File::create(&tmp)?;
        file.write_all(contents)?;
        if sync {
            file.sync_all()?;
        }
    }
    fs::rename(&tmp, path)?;
    if let (true, Some(parent)) = (sync, path.parent()) {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// A small text file's contents, `None` if it does not exist. Bytes that are not UTF-8 make
/// it malformed, like any other garbage, not an I/O failure.
pub(crate) fn read_text_file(path: &Path) -> Result<Option<String>, StorageError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::io(path)(e)),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| StorageError::Malformed {
            path: path.to_path_buf(),
            reason: "not UTF-8 text".to_string(),
        })
}

/// Renders entries (already formatted lines) in Kafka's checkpoint layout.
pub(crate) fn format_checkpoint(lines: &[String]) -> String {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", lines.len());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Reads a checkpoint file into its entry lines, split on whitespace; a missing file is empty.
pub(crate) fn read_checkpoint_entries(
    path: &Path,
    fields: usize,
) -> Result<Vec<Vec<String>>, StorageError> {
    let Some(text) = read_text_file(path)? else {
        return Ok(Vec::new());
    };
    let malformed = |reason: &str| StorageError::Malformed {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(CHECKPOINT_VERSION) {
        return Err(malformed("unsupported version line"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| malformed("bad count line"))?;
    let entries: Vec<Vec<String>> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    if entries.len() != count {
        return Err(malformed("entry count does not match the count line"));
    }
    if entries.iter().any(|e: &Vec<String>| e.len() != fields) {
        return Err(malformed("wrong number of fields in an entry"));
    }
    Ok(entries)
}

/// A per-log-dir `topic partition offset` checkpoint file.
#[derive(Clone, Debug)]
pub struct OffsetCheckpointFile {
    path: PathBuf,
}

impl OffsetCheckpointFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All entries; an absent file reads as empty.
    pub fn read(&self) -> Result<BTreeMap<TopicPartition, i64>, StorageError> {
        let malformed = || StorageError::Malformed {
            path: self.path.clone(),
            reason: "unparsable entry".to_string(),
        };
        read_checkpoint_entries(&self.path, 3)?
            .into_iter()
            .map(|fields| {
                let partition = fields[1].parse().map_err(|_| malformed())?;
                let offset = fields[2].parse().map_err(|_| malformed())?;
                Ok((TopicPartition::new(fields[0].clone(), partition), offset))
            })
            .collect()
    }

    /// Atomically replaces the file with `offsets`.
    pub fn write(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), StorageError> {
        let lines: Vec<String> = offsets
            .iter()
            .map(|(tp, offset)| format!("{} {} {}", tp.topic, tp.partition, offset))
            .collect();
        write_atomically(&self.path, format_checkpoint(&lines).as_bytes())
            .map_err(StorageError::io(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_kafkas_layout_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = OffsetCheckpointFile::new(dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE));
        assert!(file.read().unwrap().is_empty());
        let mut offsets = BTreeMap::new();
        offsets.insert(TopicPartition::new("a-b", 0), 17);
        offsets.insert(TopicPartition::new("c", 3), 0);
        file.write(&offsets).unwrap();
        let text = fs::read_to_string(file.path()).unwrap();
        assert_eq!(text, "0\n2\na-b 0 17\nc 3 0\n");
        assert_eq!(file.read().unwrap(), offsets);
        assert!(!dir
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());
    }

    #[test]
    fn binary_garbage_is_malformed_like_text_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        for garbage in [
            &b"not a checkpoint"[..],
            &[0xff, 0xfe, 0x00, 0x80, 0x0a][..],
        ] {
            fs::write(&path, garbage).unwrap();
            assert!(matches!(
                OffsetCheckpointFile::new(&path).read(),
                Err(StorageError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn rejects_a_count_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        fs::write(&path, "0\n2\nt 0 5\n").unwrap();
        assert!(matches!(
            OffsetCheckpointFile::new(&path).read(),
            Err(StorageError::Malformed { .. })
        ));
    }
}
