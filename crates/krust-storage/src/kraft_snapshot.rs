//! KRaft's metadata snapshot files: `<end offset:020>-<epoch:010>.checkpoint` in the
//! `__cluster_metadata-0` directory, as Kafka's `org.apache.kafka.snapshot` writes them, so
//! `kafka-dump-log --cluster-metadata-decoder` and `kafka-metadata-shell --snapshot` read ours.
//!
//! A snapshot is record batches numbered from offset 0, every batch stamped with the
//! snapshot's epoch: a control batch holding a SnapshotHeaderRecord, batches of metadata
//! records (no keys), and a control batch holding a SnapshotFooterRecord. It is written as
//! `.checkpoint.part`, fsynced and renamed; a loader removes `.part` and `.deleted` leftovers.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{SnapshotFooterRecord, SnapshotHeaderRecord};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::batch::{BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::checkpoint::write_atomically_via;
use crate::error::StorageError;

pub const SNAPSHOT_SUFFIX: &str = ".checkpoint";
const PARTIAL_SUFFIX: &str = ".part";
const DELETED_SUFFIX: &str = ".deleted";
/// ControlRecordType ids (Kafka's `ControlRecordType`).
const SNAPSHOT_HEADER: i16 = 3;
const SNAPSHOT_FOOTER: i16 = 4;
/// Kafka's KafkaRaftClient batches snapshot records up to this many bytes.
const MAX_BATCH_BYTES: usize = 8 * 1024;

/// A snapshot's id (Kafka's OffsetAndEpoch): it holds every record below `end_offset`, and
/// `epoch` is the leader epoch of the last of them. Ordered by offset, then epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

impl SnapshotId {
    pub fn file_name(&self) -> String {
        format!(
            "{:020}-{:010}{SNAPSHOT_SUFFIX}",
            self.end_offset, self.epoch
        )
    }

    pub fn path(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name())
    }

    /// The id a snapshot file's name gives, with whether it is complete: `Some((id, true))`
    /// for `.checkpoint`, `Some((id, false))` for a `.part` or `.deleted` leftover.
    fn parse(file_name: &str) -> Option<(Self, bool)> {
        let (stem, complete) = if let Some(stem) = file_name.strip_suffix(SNAPSHOT_SUFFIX) {
            (stem, true)
        } else {
            let rest = file_name
                .strip_suffix(PARTIAL_SUFFIX)
                .or_else(|| file_name.strip_suffix(DELETED_SUFFIX))?;
            (rest.strip_suffix(SNAPSHOT_SUFFIX)?, false)
        };
        let (offset, epoch) = stem.split_once('-')?;
        if offset.len() != 20 || epoch.len() != 10 {
            return None;
        }
        let id = Self {
            end_offset: offset.parse().ok()?,
            epoch: epoch.parse().ok()?,
        };
        Some((id, complete))
    }
}

/// What a snapshot file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub id: SnapshotId,
    /// The header's LastContainedLogTimestamp: when the newest record in it was appended.
    pub last_contained_timestamp: i64,
    /// The control records between the header and the records (KIP-853's KRaftVersionRecord
    /// and VotersRecord), as (control type, value).
    pub control_records: Vec<(i16, Bytes)>,
    /// The metadata records' values, in order.
    pub records: Vec<Bytes>,
}

/// The complete snapshots in `dir` at or above `log_start_offset`, oldest first. Removes
/// what Kafka's loader removes: partial and deleted snapshots, and snapshots older than the
/// log start offset (the log no longer holds the records that follow them).
pub fn recover_snapshots(
    dir: &Path,
    log_start_offset: i64,
) -> Result<Vec<SnapshotId>, StorageError> {
    let mut ids = Vec::new();
    for (id, complete, path) in snapshot_files(dir)? {
        if complete && id.end_offset >= log_start_offset {
            ids.push(id);
        } else {
            remove_if_exists(&path).map_err(StorageError::io(&path))?;
        }
    }
    ids.sort();
    Ok(ids)
}

/// The complete snapshots in `dir`, oldest first, removing nothing (safe while one is
/// being written).
pub fn complete_snapshots(dir: &Path) -> Result<Vec<SnapshotId>, StorageError> {
    let mut ids: Vec<SnapshotId> = snapshot_files(dir)?
        .into_iter()
        .filter(|(_, complete, _)| *complete)
        .map(|(id, _, _)| id)
        .collect();
    ids.sort();
    Ok(ids)
}

/// Every snapshot file in `dir`: its id, whether it is complete, and its path.
fn snapshot_files(dir: &Path) -> Result<Vec<(SnapshotId, bool, PathBuf)>, StorageError> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(StorageError::io(dir))? {
        let entry = entry.map_err(StorageError::io(dir))?;
        let name = entry.file_name();
        if let Some((id, complete)) = name.to_str().and_then(SnapshotId::parse) {
            files.push((id, complete, entry.path()));
        }
    }
    Ok(files)
}

/// Writes the snapshot `id` of `records` (metadata record values) in `dir` durably; returns
/// the file's size.
pub fn write_snapshot(
    dir: &Path,
    id: SnapshotId,
    last_contained_timestamp: i64,
    records: &[Bytes],
    now_ms: i64,
) -> Result<u64, StorageError> {
    write_snapshot_with_control(dir, id, last_contained_timestamp, &[], records, now_ms)
}

/// `write_snapshot` with `control_records` ((control type, value)) written right after the
/// header, where Kafka puts the KRaftVersionRecord and VotersRecord (KIP-853).
pub fn write_snapshot_with_control(
    dir: &Path,
    id: SnapshotId,
    last_contained_timestamp: i64,
    control_records: &[(i16, Bytes)],
    records: &[Bytes],
    now_ms: i64,
) -> Result<u64, StorageError> {
    let path = id.path(dir);
    let malformed = |reason| StorageError::Malformed {
        path: path.clone(),
        reason,
    };
    let contents = encode_snapshot(
        id,
        last_contained_timestamp,
        control_records,
        records,
        now_ms,
    )
    .map_err(malformed)?;
    write_atomically_via(&path, PARTIAL_SUFFIX, &contents).map_err(StorageError::io(&path))?;
    Ok(contents.len() as u64)
}

/// Installs the snapshot file `contents` (received whole from the quorum's leader) as the
/// snapshot `id` in `dir`: checked first, then written `.part`, fsynced and renamed.
pub fn install_snapshot_file(
    dir: &Path,
    id: SnapshotId,
    contents: &[u8],
) -> Result<Snapshot, StorageError> {
    let path = id.path(dir);
    let snapshot = decode_snapshot(id, Bytes::copy_from_slice(contents), &path)?;
    write_atomically_via(&path, PARTIAL_SUFFIX, contents).map_err(StorageError::io(&path))?;
    Ok(snapshot)
}

/// The snapshot file's bytes, as `install_snapshot_file` takes them.
pub fn read_snapshot_file(dir: &Path, id: SnapshotId) -> Result<Bytes, StorageError> {
    let path = id.path(dir);
    Ok(Bytes::from(
        fs::read(&path).map_err(StorageError::io(&path))?,
    ))
}

/// Reads and checks the snapshot `id` in `dir`: CRCs, the header first, the footer last.
pub fn read_snapshot(dir: &Path, id: SnapshotId) -> Result<Snapshot, StorageError> {
    let path = id.path(dir);
    let bytes = Bytes::from(fs::read(&path).map_err(StorageError::io(&path))?);
    decode_snapshot(id, bytes, &path)
}

fn decode_snapshot(
    id: SnapshotId,
    mut bytes: Bytes,
    path: &Path,
) -> Result<Snapshot, StorageError> {
    let malformed = |reason: String| StorageError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let batches =
        RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| malformed(e.to_string()))?;
    let mut records = batches.into_iter().flat_map(|set| set.records);
    let header = snapshot_header(records.next()).map_err(malformed)?;
    let mut values = Vec::new();
    let mut control_records = Vec::new();
    let mut footer_seen = false;
    for record in records {
        if footer_seen {
            return Err(malformed("records after the SnapshotFooterRecord".into()));
        }
        if record.control {
            let kind = control_type(&record);
            footer_seen = kind == Some(SNAPSHOT_FOOTER);
            if let Some(kind) = kind.filter(|_| !footer_seen && values.is_empty()) {
                control_records.push((kind, record.value.unwrap_or_default()));
            }
            continue;
        }
        values.push(
            record
                .value
                .ok_or_else(|| malformed(format!("record {} has no value", record.offset)))?,
        );
    }
    if !footer_seen {
        return Err(malformed(
            "does not end with a SnapshotFooterRecord (cut short?)".into(),
        ));
    }
    Ok(Snapshot {
        id,
        last_contained_timestamp: header.last_contained_log_timestamp,
        control_records,
        records: values,
    })
}

/// The snapshot's LastContainedLogTimestamp, reading only its first batch.
pub fn read_snapshot_timestamp(dir: &Path, id: SnapshotId) -> Result<i64, StorageError> {
    let path = id.path(dir);
    let malformed = |reason: String| StorageError::Malformed {
        path: path.clone(),
        reason,
    };
    let mut file = fs::File::open(&path).map_err(StorageError::io(&path))?;
    let mut first = vec![0; RECORD_BATCH_OVERHEAD];
    file.read_exact(&mut first)
        .map_err(StorageError::io(&path))?;
    let size = BatchHeader::parse(&first)
        .map(|h| h.size_in_bytes())
        .filter(|size| (RECORD_BATCH_OVERHEAD..=MAX_BATCH_BYTES).contains(size))
        .ok_or_else(|| malformed("its first batch has a bad length".into()))?;
    first.resize(size, 0);
    file.read_exact(&mut first[RECORD_BATCH_OVERHEAD..])
        .map_err(StorageError::io(&path))?;
    let mut bytes = Bytes::from(first);
    let batches =
        RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| malformed(e.to_string()))?;
    let header = snapshot_header(batches.into_iter().flat_map(|set| set.records).next());
    Ok(header.map_err(malformed)?.last_contained_log_timestamp)
}

/// Renames a snapshot `*.checkpoint.deleted` (a reader that opened it keeps reading) and
/// returns the new path, to be removed after `file.delete.delay.ms`.
pub fn rename_for_deletion(dir: &Path, id: SnapshotId) -> Result<PathBuf, StorageError> {
    let path = id.path(dir);
    let mut deleted = path.clone().into_os_string();
    deleted.push(DELETED_SUFFIX);
    let deleted = PathBuf::from(deleted);
    fs::rename(&path, &deleted).map_err(StorageError::io(&path))?;
    Ok(deleted)
}

/// The snapshot file's size in bytes.
pub fn snapshot_size(dir: &Path, id: SnapshotId) -> Result<u64, StorageError> {
    let path = id.path(dir);
    Ok(fs::metadata(&path).map_err(StorageError::io(&path))?.len())
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn snapshot_header(first: Option<Record>) -> Result<SnapshotHeaderRecord, String> {
    let header = first
        .filter(|r| r.control && control_type(r) == Some(SNAPSHOT_HEADER))
        .ok_or("does not start with a SnapshotHeaderRecord")?;
    let mut value = header.value.unwrap_or_default();
    SnapshotHeaderRecord::decode(&mut value, 0)
        .map_err(|e| format!("bad SnapshotHeaderRecord: {e}"))
}

fn control_type(record: &Record) -> Option<i16> {
    let key = record.key.as_ref()?;
    (key.len() >= 4).then(|| i16::from_be_bytes([key[2], key[3]]))
}

fn encode_snapshot(
    id: SnapshotId,
    last_contained_timestamp: i64,
    control_records: &[(i16, Bytes)],
    records: &[Bytes],
    now_ms: i64,
) -> Result<Vec<u8>, String> {
    let mut out = BytesMut::new();
    let mut offset = 0i64;
    let header = SnapshotHeaderRecord::default()
        .with_version(0)
        .with_last_contained_log_timestamp(last_contained_timestamp);
    let header = control_record(SNAPSHOT_HEADER, &header)?;
    encode_batch(&mut out, id.epoch, &mut offset, now_ms, [header])?;
    if !control_records.is_empty() {
        let control = control_records
            .iter()
            .map(|(kind, value)| (Some(control_key(*kind)), Some(value.clone()), true));
        encode_batch(&mut out, id.epoch, &mut offset, now_ms, control)?;
    }
    let mut chunk = Vec::new();
    let mut chunk_bytes = 0;
    for value in records {
        if chunk_bytes + value.len() > MAX_BATCH_BYTES && !chunk.is_empty() {
            encode_batch(&mut out, id.epoch, &mut offset, now_ms, chunk.drain(..))?;
            chunk_bytes = 0;
        }
        chunk_bytes += value.len();
        chunk.push((None, Some(value.clone()), false));
    }
    if !chunk.is_empty() {
        encode_batch(&mut out, id.epoch, &mut offset, now_ms, chunk)?;
    }
    let footer = control_record(
        SNAPSHOT_FOOTER,
        &SnapshotFooterRecord::default().with_version(0),
    )?;
    encode_batch(&mut out, id.epoch, &mut offset, now_ms, [footer])?;
    Ok(out.to_vec())
}

type Entry = (Option<Bytes>, Option<Bytes>, bool);

/// A control record's key (version 0, type) and value (the message at version 0).
fn control_record<M: Encodable>(kind: i16, message: &M) -> Result<Entry, String> {
    let mut value = BytesMut::new();
    message.encode(&mut value, 0).map_err(|e| e.to_string())?;
    Ok((Some(control_key(kind)), Some(value.freeze()), true))
}

/// A control record's key: version 0, then the control type.
fn control_key(kind: i16) -> Bytes {
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(kind);
    key.freeze()
}

/// Appends one batch of `entries` (all control or all data) numbered from `*offset`.
fn encode_batch(
    out: &mut BytesMut,
    epoch: i32,
    offset: &mut i64,
    now_ms: i64,
    entries: impl IntoIterator<Item = Entry>,
) -> Result<(), String> {
    let records: Vec<Record> = entries
        .into_iter()
        .map(|(key, value, control)| {
            let record = Record {
                transactional: false,
                control,
                delete_horizon: false,
                partition_leader_epoch: epoch,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: *offset,
                // The encoder keeps one batch while offset - sequence stays constant.
                sequence: i32::try_from(*offset).unwrap_or(i32::MAX),
                timestamp: now_ms,
                key,
                value,
                headers: Default::default(),
            };
            *offset += 1;
            record
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(out, &records, &options).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, size: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(vec![i as u8; size])).collect()
    }

    #[test]
    fn a_written_snapshot_reads_back_with_its_header_and_records() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId {
            end_offset: 1234,
            epoch: 3,
        };
        let records = values(2000, 37);
        let size = write_snapshot(dir.path(), id, 99, &records, 1000).unwrap();
        assert_eq!(read_snapshot_timestamp(dir.path(), id).unwrap(), 99);
        assert_eq!(
            dir.path()
                .join("00000000000000001234-0000000003.checkpoint"),
            id.path(dir.path())
        );
        assert_eq!(size, snapshot_size(dir.path(), id).unwrap());
        let snapshot = read_snapshot(dir.path(), id).unwrap();
        assert_eq!(snapshot.last_contained_timestamp, 99);
        assert_eq!(snapshot.records, records);
    }

    #[test]
    fn control_records_after_the_header_read_back_and_a_copy_installs_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId {
            end_offset: 5,
            epoch: 2,
        };
        let voters = vec![(6, Bytes::from_static(b"voters"))];
        write_snapshot_with_control(dir.path(), id, 7, &voters, &values(3, 4), 0).unwrap();
        let contents = read_snapshot_file(dir.path(), id).unwrap();
        let peer = tempfile::tempdir().unwrap();
        let installed = install_snapshot_file(peer.path(), id, &contents).unwrap();
        assert_eq!(installed, read_snapshot(dir.path(), id).unwrap());
        assert_eq!(installed.control_records, voters);
        assert_eq!(installed.records, values(3, 4));
        assert!(install_snapshot_file(peer.path(), id, &contents[..contents.len() - 1]).is_err());
    }

    #[test]
    fn records_are_batched_and_every_batch_carries_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId {
            end_offset: 10,
            epoch: 7,
        };
        write_snapshot(dir.path(), id, 0, &values(100, 200), 0).unwrap();
        let mut bytes = Bytes::from(fs::read(id.path(dir.path())).unwrap());
        let batches = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
        // Header, 20000 bytes of records in ~8 KiB batches, footer.
        assert_eq!(batches.len(), 5);
        let offsets: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.records.iter().map(|r| r.offset))
            .collect();
        assert_eq!(offsets, (0..102).collect::<Vec<_>>());
        assert!(batches
            .iter()
            .flat_map(|b| &b.records)
            .all(|r| r.partition_leader_epoch == 7));
    }

    #[test]
    fn a_cut_short_or_corrupt_snapshot_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId {
            end_offset: 5,
            epoch: 0,
        };
        write_snapshot(dir.path(), id, 0, &values(10, 10), 0).unwrap();
        let path = id.path(dir.path());
        let whole = fs::read(&path).unwrap();
        fs::write(&path, &whole[..whole.len() - 30]).unwrap();
        let error = read_snapshot(dir.path(), id).unwrap_err().to_string();
        assert!(
            error.contains("00000000000000000005-0000000000.checkpoint"),
            "{error}"
        );
        let mut flipped = whole.clone();
        flipped[100] ^= 0xff;
        fs::write(&path, flipped).unwrap();
        assert!(read_snapshot(dir.path(), id).is_err());
    }

    #[test]
    fn recovery_keeps_complete_snapshots_from_the_log_start_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let id = |end_offset| SnapshotId {
            end_offset,
            epoch: 1,
        };
        for offset in [5, 10, 20] {
            write_snapshot(dir.path(), id(offset), 0, &values(1, 1), 0).unwrap();
        }
        rename_for_deletion(dir.path(), id(20)).unwrap();
        fs::write(dir.path().join(id(30).file_name() + ".part"), b"half").unwrap();
        fs::write(dir.path().join("00000000000000000000.log"), b"").unwrap();
        assert_eq!(recover_snapshots(dir.path(), 7).unwrap(), vec![id(10)]);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec!["00000000000000000000.log".to_string(), id(10).file_name()]
        );
    }
}
