//! `partition.metadata`: the topic id of a partition directory (KIP-516).
//!
//! Kafka writes `version: 0` and `topic_id: <uuid>` lines, the uuid in URL-safe base64
//! without padding (22 characters).
//!
//! As in Kafka, the file is written without fsync when a partition is created (thousands at
//! once would each wait for the disk); the partition's next log flush fsyncs it. The topic id
//! is in the metadata log, so a file lost to a crash (absent or empty) is written again.

use std::path::{Path, PathBuf};

use crate::checkpoint::{read_text_file, write_atomically_unsynced};
use crate::error::StorageError;

pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The `partition.metadata` file of one partition directory.
#[derive(Clone, Debug)]
pub struct PartitionMetadataFile {
    path: PathBuf,
}

impl PartitionMetadataFile {
    pub fn new(partition_dir: &Path) -> Self {
        Self {
            path: partition_dir.join(PARTITION_METADATA_FILE),
        }
    }

    pub fn write(&self, topic_id: &[u8; 16]) -> Result<(), StorageError> {
        let text = format!("version: 0\ntopic_id: {}", encode_uuid(topic_id));
        write_atomically_unsynced(&self.path, text.as_bytes()).map_err(StorageError::io(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored topic id; `None` when the file does not exist or is empty.
    pub fn read(&self) -> Result<Option<[u8; 16]>, StorageError> {
        let text = match read_text_file(&self.path)? {
            Some(text) if !text.is_empty() => text,
            _ => return Ok(None),
        };
        let malformed = |reason: &str| StorageError::Malformed {
            path: self.path.clone(),
            reason: reason.to_string(),
        };
        let mut version = None;
        let mut topic_id = None;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(':')
                .ok_or_else(|| malformed("line without ':'"))?;
            match key.trim() {
                "version" => version = Some(value.trim().to_string()),
                "topic_id" => topic_id = Some(value.trim().to_string()),
                _ => return Err(malformed("unknown key")),
            }
        }
        if version.as_deref() != Some("0") {
            return Err(malformed("unsupported version"));
        }
        let topic_id = topic_id.ok_or_else(|| malformed("missing topic_id"))?;
        decode_uuid(&topic_id)
            .map(Some)
            .ok_or_else(|| malformed("bad topic_id"))
    }
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding.
pub fn encode_uuid(uuid: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    for chunk in uuid.chunks(3) {
        let mut group = [0u8; 3];
        group[..chunk.len()].copy_from_slice(chunk);
        let bits = u32::from(group[0]) << 16 | u32::from(group[1]) << 8 | u32::from(group[2]);
        for i in 0..=chunk.len() {
            out.push(BASE64_URL[(bits >> (18 - 6 * i) & 0x3f) as usize] as char);
        }
    }
    out
}

/// Parses `encode_uuid`'s output.
pub fn decode_uuid(text: &str) -> Option<[u8; 16]> {
    if text.len() != 22 {
        return None;
    }
    let mut bits: u32 = 0;
    let mut bit_count = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes() {
        let value = BASE64_URL.iter().position(|b| *b == c)? as u32;
        bits = bits << 6 | value;
        bit_count += 6;
        if bit_count >= 8 {
            bit_count -= 8;
            out.push((bits >> bit_count) as u8);
            bits &= (1 << bit_count) - 1;
        }
    }
    if bits != 0 {
        return None;
    }
    out.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn uuid_text_matches_kafkas_base64url() {
        let mut uuid = [0u8; 16];
        uuid[15] = 1;
        assert_eq!(encode_uuid(&uuid), "AAAAAAAAAAAAAAAAAAAAAQ");
        let all = [0xffu8; 16];
        assert_eq!(encode_uuid(&all), "_____________________w");
        assert_eq!(decode_uuid("_____________________w"), Some(all));
        assert_eq!(decode_uuid("_____________________x"), None);
    }

    #[test]
    fn writes_kafkas_text_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = PartitionMetadataFile::new(dir.path());
        assert_eq!(file.read().unwrap(), None);
        let id: [u8; 16] = *b"0123456789abcdef";
        file.write(&id).unwrap();
        let text = fs::read_to_string(dir.path().join(PARTITION_METADATA_FILE)).unwrap();
        assert_eq!(text, format!("version: 0\ntopic_id: {}", encode_uuid(&id)));
        assert_eq!(file.read().unwrap(), Some(id));
    }

    #[test]
    fn an_empty_file_left_by_a_crash_reads_as_absent_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(PARTITION_METADATA_FILE), b"").unwrap();
        let file = PartitionMetadataFile::new(dir.path());
        assert_eq!(file.read().unwrap(), None);
        let id: [u8; 16] = *b"fedcba9876543210";
        file.write(&id).unwrap();
        assert_eq!(file.read().unwrap(), Some(id));
    }
}
