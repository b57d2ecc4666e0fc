//! `ProducerStateManager`: idempotent-producer and transaction state of one partition (KIP-98).
//!
//! Per producer id it keeps the epoch and the last five batches' sequence and offset ranges,
//! so a retried batch is recognised and answered with its original offsets, a gap in
//! sequences is refused, and a fenced (older) epoch is refused. A producer's first
//! transactional batch starts its transaction; a COMMIT or ABORT marker ends it. The
//! transactions still open, and those ended but whose marker the high watermark has not
//! passed, bound the last stable offset. The state is snapshotted to `<offset>.snapshot` files
//! so a restart replays only the log after the latest snapshot.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::append_origin::AppendOrigin;
use crate::batch::{increment_sequence, BatchHeader};
use crate::checkpoint::write_atomically;
use crate::control_batch::EndTxnMarker;
use crate::error::{AppendError, StorageError};
use crate::log_file_utils::{deleted_path, offset_file_path, parse_offset_file_name};
use crate::producer_snapshot::{self, SnapshotEntry, SNAPSHOT_FILE_SUFFIX};

/// How many recent batches per producer are remembered for duplicate detection (Kafka's 5,
/// matching `max.in.flight.requests.per.connection` <= 5 for idempotent producers).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
const NO_PRODUCER_EPOCH: i16 = -1;
const NO_SEQUENCE: i32 = -1;

/// Sequence and offset range of one appended batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

/// What the partition remembers about one producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: i64,
}

impl ProducerStateEntry {
    fn empty() -> Self {
        Self {
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    /// The last sequence number appended (-1: none).
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The max timestamp of the last batch appended (-1: none).
    pub fn last_timestamp(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.timestamp)
    }

    /// A marker at `offset` ends the producer's transaction (Kafka's `appendEndTxnMarker`):
    /// the transaction it ended, if one was open.
    fn end_txn(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: EndTxnMarker,
        offset: i64,
    ) -> Option<CompletedTxn> {
        let completed = (self.current_txn_first_offset >= 0).then_some(CompletedTxn {
            producer_id,
            first_offset: self.current_txn_first_offset,
            last_offset: offset,
            aborted: !marker.commit,
        });
        if epoch != self.producer_epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
        self.coordinator_epoch = marker.coordinator_epoch;
        self.current_txn_first_offset = -1;
        completed
    }

    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        if epoch != self.producer_epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
        self.batches.push_back(batch);
        if self.batches.len() > NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
    }
}

/// A transaction a marker ended (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// Producer updates of one append, applied only after its batches are on disk.
#[derive(Default)]
pub(crate) struct ProducerAppend {
    updates: HashMap<i64, ProducerStateEntry>,
    /// Transactions begun: (first offset, producer id).
    started: Vec<(i64, i64)>,
    completed: Vec<CompletedTxn>,
}

pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    map_end_offset: i64,
    /// Open transactions: first offset -> producer id.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Ended transactions whose marker is not below the high watermark yet (Kafka's
    /// `unreplicatedTxns`): first offset -> marker offset. They stay unstable until then, so
    /// the last stable offset never passes a marker a new leader might not have.
    unreplicated_txns: BTreeMap<i64, i64>,
}

/// Kafka's `checkSequence`: a new epoch starts at 0, a known one continues its sequence.
fn check_sequence(entry: &ProducerStateEntry, header: &BatchHeader) -> Result<(), AppendError> {
    let first_seq = header.base_sequence;
    let in_order = if header.producer_epoch != entry.producer_epoch {
        // A new epoch starts at sequence 0; an unknown producer may start anywhere (its
        // earlier batches may have been removed from the log), as in Kafka.
        first_seq == 0 || entry.producer_epoch == NO_PRODUCER_EPOCH
    } else {
        let last_seq = entry.last_seq();
        first_seq == increment_sequence(last_seq, 1) || (last_seq == NO_SEQUENCE && first_seq == 0)
    };
    if in_order {
        return Ok(());
    }
    Err(AppendError::OutOfOrderSequence {
        producer_id: header.producer_id,
        epoch: header.producer_epoch,
        expected_after: entry.last_seq(),
        found: first_seq,
    })
}

fn metadata(header: &BatchHeader, first_offset: i64) -> BatchMetadata {
    BatchMetadata {
        first_seq: header.base_sequence,
        last_seq: header.last_sequence(),
        first_offset,
        last_offset: first_offset + i64::from(header.last_offset_delta),
        timestamp: header.max_timestamp,
    }
}

impl ProducerStateManager {
    /// Loads the newest valid snapshot at or below `log_end_offset`; newer snapshots (written
    /// for data that did not survive) are deleted. The log must be replayed from
    /// `map_end_offset()` up to its end.
    /// The producer state of a new partition, with no snapshot yet.
    pub(crate) fn empty(dir: &Path, log_start_offset: i64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            map_end_offset: log_start_offset,
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
        }
    }

    pub(crate) fn load(
        dir: &Path,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<Self, StorageError> {
        Self::load_at_or_below(dir, log_start_offset, log_end_offset, log_end_offset)
    }

    /// `load`, starting from a snapshot at or below `max_offset` (newer ones are kept): the
    /// log is replayed from there, rebuilding the transaction indexes of the segments above.
    pub(crate) fn load_at_or_below(
        dir: &Path,
        log_start_offset: i64,
        log_end_offset: i64,
        max_offset: i64,
    ) -> Result<Self, StorageError> {
        let mut manager = Self::empty(dir, log_start_offset);
        let mut snapshots = manager.snapshot_offsets()?;
        snapshots.sort_unstable();
        for offset in snapshots.iter().rev().copied() {
            let path = offset_file_path(dir, offset, SNAPSHOT_FILE_SUFFIX);
            if offset > log_end_offset || offset < log_start_offset {
                remove_file(&path)?;
                continue;
            }
            if offset > max_offset {
                continue;
            }
            let bytes = fs::read(&path).map_err(StorageError::io(&path))?;
            match producer_snapshot::decode(&bytes) {
                Ok(entries) => {
                    manager.restore(&entries);
                    manager.map_end_offset = offset;
                    break;
                }
                Err(reason) => {
                    warn!(path = %path.display(), %reason, "deleting corrupt producer snapshot");
                    remove_file(&path)?;
                }
            }
        }
        Ok(manager)
    }

    fn restore(&mut self, entries: &[SnapshotEntry]) {
        for e in entries {
            let mut entry = ProducerStateEntry::empty();
            entry.producer_epoch = e.epoch;
            entry.coordinator_epoch = e.coordinator_epoch;
            entry.current_txn_first_offset = e.current_txn_first_offset;
            if e.current_txn_first_offset >= 0 {
                self.ongoing_txns
                    .insert(e.current_txn_first_offset, e.producer_id);
            }
            if e.last_offset >= 0 {
                entry.batches.push_back(BatchMetadata {
                    first_seq: increment_sequence(e.last_sequence, -e.offset_delta),
                    last_seq: e.last_sequence,
                    first_offset: e.last_offset - i64::from(e.offset_delta),
                    last_offset: e.last_offset,
                    timestamp: e.timestamp,
                });
            }
            self.producers.insert(e.producer_id, entry);
        }
    }

    fn snapshot_offsets(&self) -> Result<Vec<i64>, StorageError> {
        let entries = fs::read_dir(&self.dir).map_err(StorageError::io(&self.dir))?;
        let mut offsets = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StorageError::io(&self.dir))?;
            let name = entry.file_name();
            if let Some(offset) = name
                .to_str()
                .and_then(|n| parse_offset_file_name(n, SNAPSHOT_FILE_SUFFIX))
            {
                offsets.push(offset);
            }
        }
        Ok(offsets)
    }

    /// All known producers.
    pub fn producers(&self) -> &HashMap<i64, ProducerStateEntry> {
        &self.producers
    }

    /// The offset up to which the log has been applied to this state.
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// A batch of the same epoch and exact sequence range among the producer's last five.
    pub(crate) fn find_duplicate(&self, header: &BatchHeader) -> Option<BatchMetadata> {
        let entry = self.producers.get(&header.producer_id)?;
        if entry.producer_epoch != header.producer_epoch {
            return None;
        }
        let last_seq = header.last_sequence();
        entry
            .batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last_seq)
            .copied()
    }

    /// Kafka's `ProducerAppendInfo` checks for a batch appended as leader by `origin`,
    /// staging the update in `staged`: the epoch, the sequence (client batches only, as
    /// coordinators write none), the transaction state, and for a control batch its `marker`.
    pub(crate) fn validate(
        &self,
        staged: &mut ProducerAppend,
        header: &BatchHeader,
        first_offset: i64,
        origin: AppendOrigin,
        marker: Option<EndTxnMarker>,
    ) -> Result<(), AppendError> {
        let producer_id = header.producer_id;
        let entry = self.staged_entry(staged, producer_id);
        let epoch = header.producer_epoch;
        if entry.producer_epoch != NO_PRODUCER_EPOCH && epoch < entry.producer_epoch {
            return Err(AppendError::InvalidProducerEpoch {
                producer_id,
                current: entry.producer_epoch,
                found: epoch,
            });
        }
        if header.is_control() {
            if let Some(marker) = marker {
                if entry.coordinator_epoch > marker.coordinator_epoch {
                    return Err(AppendError::TransactionCoordinatorFenced {
                        producer_id,
                        current: entry.coordinator_epoch,
                        found: marker.coordinator_epoch,
                    });
                }
                let completed = entry.end_txn(producer_id, epoch, marker, first_offset);
                staged.completed.extend(completed);
            }
            return Ok(());
        }
        if origin == AppendOrigin::Client {
            check_sequence(entry, header)?;
        }
        if entry.current_txn_first_offset >= 0 && !header.is_transactional() {
            return Err(AppendError::InvalidTxnState {
                producer_id,
                offset: first_offset,
            });
        }
        entry.add_batch(epoch, metadata(header, first_offset));
        if entry.current_txn_first_offset < 0 && header.is_transactional() {
            entry.current_txn_first_offset = first_offset;
            staged.started.push((first_offset, producer_id));
        }
        Ok(())
    }

    /// The producer's entry as `staged` has it so far, starting from the applied state.
    fn staged_entry<'a>(
        &self,
        staged: &'a mut ProducerAppend,
        producer_id: i64,
    ) -> &'a mut ProducerStateEntry {
        staged.updates.entry(producer_id).or_insert_with(|| {
            self.producers
                .get(&producer_id)
                .cloned()
                .unwrap_or_else(ProducerStateEntry::empty)
        })
    }

    /// Applies the staged updates of an append that reached the log; returns the
    /// transactions it ended, each with the last stable offset right after its marker (what
    /// Kafka's transaction index records).
    pub(crate) fn commit(
        &mut self,
        staged: ProducerAppend,
        end_offset: i64,
    ) -> Vec<(CompletedTxn, i64)> {
        self.producers.extend(staged.updates);
        self.ongoing_txns.extend(staged.started);
        self.map_end_offset = end_offset;
        staged
            .completed
            .into_iter()
            .map(|txn| {
                let last_stable_offset = self.last_stable_offset_after(&txn);
                self.ongoing_txns.remove(&txn.first_offset);
                self.unreplicated_txns
                    .insert(txn.first_offset, txn.last_offset);
                (txn, last_stable_offset)
            })
            .collect()
    }

    /// Kafka's `lastStableOffset(completedTxn)`: the first offset of the oldest other open
    /// transaction, or the offset after the marker.
    fn last_stable_offset_after(&self, txn: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|(_, producer_id)| **producer_id != txn.producer_id)
            .map_or(txn.last_offset + 1, |(first_offset, _)| *first_offset)
    }

    /// Applies a batch read back from the log or copied from the leader: no check refuses it
    /// (it was accepted once), as Kafka's replication origin. Returns the transaction its
    /// marker ended, with the last stable offset after it.
    pub(crate) fn replay(
        &mut self,
        header: &BatchHeader,
        marker: Option<EndTxnMarker>,
    ) -> Option<(CompletedTxn, i64)> {
        let end_offset = header.last_offset() + 1;
        if !header.has_producer_id() {
            self.map_end_offset = end_offset;
            return None;
        }
        let producer_id = header.producer_id;
        let mut staged = ProducerAppend::default();
        let entry = self.staged_entry(&mut staged, producer_id);
        let epoch = header.producer_epoch;
        if header.is_control() {
            if let Some(marker) = marker {
                let completed = entry.end_txn(producer_id, epoch, marker, header.base_offset);
                staged.completed.extend(completed);
            } else if epoch != entry.producer_epoch {
                entry.batches.clear();
                entry.producer_epoch = epoch;
            }
        } else {
            entry.add_batch(epoch, metadata(header, header.base_offset));
            if entry.current_txn_first_offset < 0 && header.is_transactional() {
                entry.current_txn_first_offset = header.base_offset;
                staged.started.push((header.base_offset, producer_id));
            }
        }
        self.commit(staged, end_offset).into_iter().next()
    }

    /// The first offset of the oldest transaction that is open, or ended above the high
    /// watermark (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing_txns.keys().next();
        let unreplicated = self.unreplicated_txns.keys().next();
        ongoing.into_iter().chain(unreplicated).min().copied()
    }

    /// The high watermark moved to `high_watermark`: transactions whose marker is below it
    /// are stable now.
    pub(crate) fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, marker_offset| *marker_offset >= high_watermark);
    }

    /// Marks the log as applied up to `offset` (batches before it were all replayed).
    pub(crate) fn advance_to(&mut self, offset: i64) {
        self.map_end_offset = self.map_end_offset.max(offset);
    }

    /// Renames the snapshots below `offset` (the new first segment's base) to
    /// `<offset>.snapshot.deleted`, as Kafka does with a deleted segment's snapshot; returns
    /// the new paths.
    pub(crate) fn rename_snapshots_below(&self, offset: i64) -> Result<Vec<PathBuf>, StorageError> {
        let mut renamed = Vec::new();
        for snapshot in self.snapshot_offsets()?.into_iter().filter(|o| *o < offset) {
            let path = offset_file_path(&self.dir, snapshot, SNAPSHOT_FILE_SUFFIX);
            let target = deleted_path(&path);
            match fs::rename(&path, &target) {
                Ok(()) => renamed.push(target),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io(&path)(e)),
            }
        }
        Ok(renamed)
    }

    /// Kafka's `truncateFullyAndStartAt`: forgets every producer and deletes every snapshot;
    /// the log now starts (empty) at `offset`.
    pub(crate) fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        for snapshot in self.snapshot_offsets()? {
            remove_file(&offset_file_path(&self.dir, snapshot, SNAPSHOT_FILE_SUFFIX))?;
        }
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.map_end_offset = offset;
        Ok(())
    }

    /// Writes `<map_end_offset>.snapshot`.
    pub(crate) fn take_snapshot(&self) -> io::Result<()> {
        let mut entries: Vec<SnapshotEntry> = self
            .producers
            .iter()
            .map(|(producer_id, e)| {
                let last = e.batches.back();
                SnapshotEntry {
                    producer_id: *producer_id,
                    epoch: e.producer_epoch,
                    last_sequence: last.map_or(NO_SEQUENCE, |b| b.last_seq),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last.map_or(0, |b| (b.last_offset - b.first_offset) as i32),
                    timestamp: last.map_or(-1, |b| b.timestamp),
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: e.current_txn_first_offset,
                }
            })
            .collect();
        entries.sort_by_key(|e| e.producer_id);
        let path = offset_file_path(&self.dir, self.map_end_offset, SNAPSHOT_FILE_SUFFIX);
        write_atomically(&path, &producer_snapshot::encode(&entries))
    }
}

fn remove_file(path: &Path) -> Result<(), StorageError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StorageError::io(path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::batch::BatchHeader;

    fn header(pid: i64, epoch: i16, seq: i32, count: usize) -> BatchHeader {
        BatchHeader::parse(
            &TestBatch::simple(count, 0)
                .idempotent(pid, epoch, seq)
                .encode(),
        )
        .unwrap()
    }

    fn append(
        m: &mut ProducerStateManager,
        h: &BatchHeader,
        first_offset: i64,
    ) -> Result<(), AppendError> {
        let mut staged = ProducerAppend::default();
        m.validate(&mut staged, h, first_offset, AppendOrigin::Client, None)?;
        m.commit(staged, first_offset + i64::from(h.last_offset_delta) + 1);
        Ok(())
    }

    #[test]
    fn sequence_epoch_and_duplicate_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::load(dir.path(), 0, 0).unwrap();
        append(&mut m, &header(1, 0, 0, 3), 0).unwrap();
        append(&mut m, &header(1, 0, 3, 2), 3).unwrap();
        let dup = m.find_duplicate(&header(1, 0, 0, 3)).unwrap();
        assert_eq!((dup.first_offset, dup.last_offset), (0, 2));
        let gap = append(&mut m, &header(1, 0, 9, 1), 5).unwrap_err();
        assert_eq!(gap.kafka_error_code(), 45);
        append(&mut m, &header(1, 2, 0, 1), 5).unwrap();
        let old = append(&mut m, &header(1, 1, 0, 1), 6).unwrap_err();
        assert_eq!(old.kafka_error_code(), 47);
        let not_zero = append(&mut m, &header(1, 3, 4, 1), 6).unwrap_err();
        assert_eq!(not_zero.kafka_error_code(), 45);
    }

    #[test]
    fn remembers_only_the_last_five_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::load(dir.path(), 0, 0).unwrap();
        for i in 0..7 {
            append(&mut m, &header(9, 0, i, 1), i64::from(i)).unwrap();
        }
        assert!(m.find_duplicate(&header(9, 0, 1, 1)).is_none());
        assert!(m.find_duplicate(&header(9, 0, 2, 1)).is_some());
    }

    #[test]
    fn snapshot_round_trip_and_stale_snapshots_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::load(dir.path(), 0, 0).unwrap();
        append(&mut m, &header(4, 1, 0, 2), 0).unwrap();
        m.take_snapshot().unwrap();
        append(&mut m, &header(4, 1, 2, 2), 2).unwrap();
        m.take_snapshot().unwrap();
        assert!(dir.path().join("00000000000000000002.snapshot").exists());
        assert!(dir.path().join("00000000000000000004.snapshot").exists());
        let loaded = ProducerStateManager::load(dir.path(), 0, 3).unwrap();
        assert_eq!(loaded.map_end_offset(), 2);
        assert!(!dir.path().join("00000000000000000004.snapshot").exists());
        let dup = loaded.find_duplicate(&header(4, 1, 0, 2)).unwrap();
        assert_eq!((dup.first_offset, dup.last_offset), (0, 1));
    }
}
