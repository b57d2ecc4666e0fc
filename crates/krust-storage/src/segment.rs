//! `LogSegment`: one `.log` file of record batches plus its `.index`, `.timeindex` and
//! `.txnindex` (the aborted transactions whose markers it holds).
//!
//! Files are named by the segment's base offset, zero-padded to 20 digits, like Kafka's.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{BatchHeader, NO_TIMESTAMP};
use crate::config::{LogConfig, TimestampType};
use crate::file_records::{read_at, BatchScanner};
use crate::offset_index::OffsetIndex;
use crate::producer_state::CompletedTxn;
use crate::records;
use crate::time_index::TimeIndex;
use crate::txn_index::{AbortedTxnEntry, TransactionIndex, TXN_INDEX_FILE_SUFFIX};

pub const LOG_FILE_SUFFIX: &str = ".log";
pub const INDEX_FILE_SUFFIX: &str = ".index";
pub const TIME_INDEX_FILE_SUFFIX: &str = ".timeindex";

pub(crate) use crate::log_file_utils::{deleted_path, remove_if_present};
pub use crate::log_file_utils::{offset_file_path, parse_offset_file_name, DELETED_FILE_SUFFIX};

/// Kafka's `randomSegmentJitter`: uniform in [0, min(segment.jitter.ms, segment.ms)).
fn random_segment_jitter(config: &LogConfig) -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let bound = config.segment_jitter_ms.min(config.segment_ms);
    if bound <= 0 {
        return 0;
    }
    // A fresh `RandomState` is randomly keyed: enough randomness for spreading rolls, without
    // a random-number crate.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (random % bound as u64) as i64
}

/// What was appended for one batch: enough to maintain the indexes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendedBatch {
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub size: u64,
}

/// The incoming append, as far as the roll decision cares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IncomingAppend {
    pub size: u64,
    pub max_timestamp: i64,
    pub last_offset: i64,
}

/// The first offset at or after a timestamp (ListOffsets), with the timestamp found there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    /// The leader epoch that wrote `offset`, when the log knows it.
    pub leader_epoch: Option<i32>,
}

pub struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log: Arc<File>,
    size: u64,
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    pub(crate) txn_index: TransactionIndex,
    indexes_were_missing: bool,
    index_interval_bytes: u64,
    pub(crate) bytes_since_last_index_entry: u64,
    pub(crate) max_timestamp_so_far: i64,
    pub(crate) offset_of_max_timestamp_so_far: i64,
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    /// How much earlier than `segment.ms` this segment rolls (Kafka's `rollJitterMs`), drawn
    /// once per segment so that partitions created together do not all roll together.
    roll_jitter_ms: i64,
}

impl LogSegment {
    /// Creates a new, empty segment; its index files are created when the first entry is due.
    pub(crate) fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let index_path = offset_file_path(dir, base_offset, INDEX_FILE_SUFFIX);
        let time_index_path = offset_file_path(dir, base_offset, TIME_INDEX_FILE_SUFFIX);
        let segment = if index_path.exists() || time_index_path.exists() {
            // Left by an earlier segment at this offset: use them as they are.
            Self::open(dir, base_offset, config, true, now_ms)?
        } else {
            let log_path = offset_file_path(dir, base_offset, LOG_FILE_SUFFIX);
            let txn_index_path = offset_file_path(dir, base_offset, TXN_INDEX_FILE_SUFFIX);
            Self::fresh(
                log_path,
                [&index_path, &time_index_path, &txn_index_path],
                base_offset,
                config,
                now_ms,
            )?
        };
        if segment.size > 0 {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("segment {} already holds data", segment.log_path.display()),
            ));
        }
        // An empty segment has no marker: entries left by an earlier segment are stale.
        let mut segment = segment;
        segment.txn_index.reset()?;
        Ok(segment)
    }

    /// Opens a segment's files (creating absent ones); `active` preallocates the indexes.
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        active: bool,
        now_ms: i64,
    ) -> io::Result<Self> {
        let index_path = offset_file_path(dir, base_offset, INDEX_FILE_SUFFIX);
        let time_index_path = offset_file_path(dir, base_offset, TIME_INDEX_FILE_SUFFIX);
        let indexes_were_missing = !index_path.exists() || !time_index_path.exists();
        let max_index = active.then(|| config.max_index_bytes());
        let offset_index = OffsetIndex::open(&index_path, base_offset, max_index)?;
        let time_index = TimeIndex::open(&time_index_path, base_offset, max_index)?;
        let txn_index =
            TransactionIndex::open(offset_file_path(dir, base_offset, TXN_INDEX_FILE_SUFFIX))?;
        Self::assemble(
            offset_file_path(dir, base_offset, LOG_FILE_SUFFIX),
            base_offset,
            (offset_index, time_index),
            txn_index,
            indexes_were_missing,
            config,
            now_ms,
        )
    }

    /// Opens (creating if absent) the `.log` file and puts the segment together.
    fn assemble(
        log_path: PathBuf,
        base_offset: i64,
        (offset_index, time_index): (OffsetIndex, TimeIndex),
        txn_index: TransactionIndex,
        indexes_were_missing: bool,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)?;
        let size = log.metadata()?.len();
        let last_time = time_index.last_entry();
        let mut segment = Self {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            offset_index,
            time_index,
            txn_index,
            indexes_were_missing,
            index_interval_bytes: config.index_interval_bytes(),
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: last_time.timestamp,
            offset_of_max_timestamp_so_far: last_time.offset,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            roll_jitter_ms: random_segment_jitter(config),
        };
        if size > 0 {
            let mut scanner = BatchScanner::new(&segment.log, 0, size);
            segment.rolling_based_timestamp = scanner.next_header()?.map(|(_, h)| h.max_timestamp);
        }
        Ok(segment)
    }

    /// A new, empty segment whose files carry `suffix` after Kafka's names (the log
    /// cleaner's `.cleaned`); files left there by an earlier attempt are replaced.
    pub(crate) fn create_suffixed(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        suffix: &str,
        now_ms: i64,
    ) -> io::Result<Self> {
        let path = |kind: &str| offset_file_path(dir, base_offset, &format!("{kind}{suffix}"));
        let paths = [
            path(LOG_FILE_SUFFIX),
            path(INDEX_FILE_SUFFIX),
            path(TIME_INDEX_FILE_SUFFIX),
            path(TXN_INDEX_FILE_SUFFIX),
        ];
        for leftover in &paths {
            remove_if_present(leftover)?;
        }
        let [log_path, index_path, time_index_path, txn_index_path] = paths;
        Self::fresh(
            log_path,
            [&index_path, &time_index_path, &txn_index_path],
            base_offset,
            config,
            now_ms,
        )
    }

    /// An empty segment at `log_path` whose indexes are created when their first entry is due.
    fn fresh(
        log_path: PathBuf,
        [index_path, time_index_path, txn_index_path]: [&Path; 3],
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let max_index = config.max_index_bytes();
        Self::assemble(
            log_path,
            base_offset,
            (
                OffsetIndex::deferred(index_path, base_offset, max_index),
                TimeIndex::deferred(time_index_path, base_offset, max_index),
            ),
            TransactionIndex::open(txn_index_path.to_path_buf())?,
            false,
            config,
            now_ms,
        )
    }

    /// Renames the segment's files from `<name><old>` to `<name><new>` (Kafka's
    /// `changeFileSuffixes`); open descriptors and mappings stay valid.
    pub(crate) fn change_file_suffixes(&mut self, old: &str, new: &str) -> io::Result<()> {
        let renamed = |path: &Path| -> io::Result<PathBuf> {
            let text = path.to_string_lossy();
            let stem = text.strip_suffix(old).ok_or_else(|| {
                io::Error::other(format!("{} does not end with {old:?}", path.display()))
            })?;
            Ok(PathBuf::from(format!("{stem}{new}")))
        };
        let log_path = renamed(&self.log_path)?;
        std::fs::rename(&self.log_path, &log_path)?;
        self.log_path = log_path;
        let index_path = renamed(self.offset_index.path())?;
        self.offset_index.file().rename_to(&index_path)?;
        let time_index_path = renamed(self.time_index.path())?;
        self.time_index.file().rename_to(&time_index_path)?;
        let txn_index_path = renamed(self.txn_index.path())?;
        self.txn_index.rename_to(txn_index_path)
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Bytes of batches in the `.log` file.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The largest batch timestamp seen in this segment (NO_TIMESTAMP if none).
    pub fn max_timestamp_so_far(&self) -> i64 {
        self.max_timestamp_so_far
    }

    /// Kafka's `largestTimestamp`, what time retention compares: the newest batch timestamp,
    /// or the `.log` file's modification time when no batch carries one.
    pub(crate) fn largest_timestamp(&self) -> io::Result<i64> {
        if self.max_timestamp_so_far >= 0 {
            return Ok(self.max_timestamp_so_far);
        }
        let modified = self.log.metadata()?.modified()?;
        Ok(modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64))
    }

    /// True when an index is absent or fails Kafka's sanity check and must be rebuilt.
    pub(crate) fn needs_index_rebuild(&self) -> bool {
        self.indexes_were_missing
            || self.txn_index.corruption().is_some()
            || !self.offset_index.sanity_check()
            || !self.time_index.sanity_check()
    }

    pub(crate) fn log_file(&self) -> &Arc<File> {
        &self.log
    }

    pub(crate) fn set_size(&mut self, size: u64) {
        self.size = size;
    }

    /// Writes already validated and patched batches at the end of the `.log` file and indexes them.
    pub(crate) fn append(&mut self, bytes: &[u8], batches: &[AppendedBatch]) -> io::Result<()> {
        if self.bytes_since_last_index_entry + bytes.len() as u64 > self.index_interval_bytes {
            // An index entry may be due within these batches.
            self.offset_index.file().create_file()?;
            self.time_index.file().create_file()?;
        }
        if let Err(e) = self.log.write_all_at(bytes, self.size) {
            // Best effort: leave no partial batch behind the committed size.
            let _ = self.log.set_len(self.size);
            return Err(e);
        }
        let mut position = self.size;
        for batch in batches {
            self.index_batch(position, batch);
            position += batch.size;
        }
        self.size = position;
        Ok(())
    }

    /// Kafka's per-batch index rule: an offset entry (and a time entry) once more than
    /// `index.interval.bytes` were appended since the last one.
    pub(crate) fn index_batch(&mut self, position: u64, batch: &AppendedBatch) {
        if self.rolling_based_timestamp.is_none() {
            self.rolling_based_timestamp = Some(batch.max_timestamp);
        }
        if batch.max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = batch.max_timestamp;
            self.offset_of_max_timestamp_so_far = batch.last_offset;
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index.append(batch.last_offset, position as u32);
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
            );
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += batch.size;
    }

    /// Applies a changed `index.interval.bytes`.
    pub(crate) fn set_index_interval_bytes(&mut self, config: &LogConfig) {
        self.index_interval_bytes = config.index_interval_bytes();
    }

    /// Forgets per-segment state before a rebuild from the `.log` file.
    pub(crate) fn reset_for_rebuild(&mut self) {
        self.offset_index.truncate_to(self.base_offset);
        self.time_index.truncate_to(self.base_offset);
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = self.base_offset;
        self.rolling_based_timestamp = None;
        self.indexes_were_missing = false;
    }

    /// Kafka's `shouldRoll`: size, age, full index, or relative-offset overflow.
    pub(crate) fn should_roll(
        &self,
        config: &LogConfig,
        incoming: &IncomingAppend,
        now_ms: i64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        let waited = match self.rolling_based_timestamp {
            Some(t) if t >= 0 => incoming.max_timestamp.saturating_sub(t),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size + incoming.size > config.segment_bytes()
            || waited > config.segment_ms - self.roll_jitter_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || incoming.last_offset - self.base_offset > i64::from(i32::MAX)
    }

    /// The offset after the last batch in this segment (Kafka's `readNextOffset`).
    pub(crate) fn next_offset(&self) -> io::Result<i64> {
        let start = u64::from(self.offset_index.last_entry().position);
        let mut scanner = BatchScanner::new(&self.log, start, self.size);
        let mut next = self.base_offset;
        while let Some((_, header)) = scanner.next_header()? {
            next = header.last_offset() + 1;
        }
        Ok(next)
    }

    /// The file position where reading for `offset` should start (sparse index lookup).
    pub(crate) fn index_position(&self, offset: i64) -> u64 {
        u64::from(self.offset_index.lookup(offset).position)
    }

    /// Finds the first record at or after `timestamp`, starting no earlier than `starting_offset`.
    ///
    /// Uncompressed CreateTime batches are walked record by record; for compressed batches
    /// (whose records are not decompressed here) the batch's base offset is returned.
    pub(crate) fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        starting_offset: i64,
    ) -> io::Result<Option<TimestampAndOffset>> {
        let indexed = self.time_index.lookup(timestamp);
        let start = self.index_position(indexed.offset.max(starting_offset));
        let mut scanner = BatchScanner::new(&self.log, start, self.size);
        while let Some((position, header)) = scanner.next_header()? {
            if header.max_timestamp < timestamp || header.last_offset() < starting_offset {
                continue;
            }
            return self.first_record_at_or_after(position, &header, timestamp, starting_offset);
        }
        Ok(None)
    }

    fn first_record_at_or_after(
        &self,
        position: u64,
        header: &BatchHeader,
        timestamp: i64,
        starting_offset: i64,
    ) -> io::Result<Option<TimestampAndOffset>> {
        let found = |timestamp, offset: i64| {
            Some(TimestampAndOffset {
                timestamp,
                offset: offset.max(starting_offset),
                leader_epoch: None,
            })
        };
        // LogAppendTime stamps every record with the batch's max timestamp.
        if header.timestamp_type() == TimestampType::LogAppendTime {
            return Ok(found(header.max_timestamp, header.base_offset));
        }
        let bytes = read_at(&self.log, position, header.size_in_bytes())?;
        let Ok(records) = records::batch_records(&bytes, header) else {
            return Ok(found(header.max_timestamp, header.base_offset));
        };
        for record in records {
            let Ok(record) = record else { break };
            let record_timestamp = header.base_timestamp + record.timestamp_delta;
            let offset = header.base_offset + i64::from(record.offset_delta);
            if record_timestamp >= timestamp && offset >= starting_offset {
                return Ok(found(record_timestamp, offset));
            }
        }
        Ok(found(header.max_timestamp, header.base_offset))
    }

    /// Kafka's `LogSegment.truncateTo`: removes every batch holding an offset >= `offset`
    /// (a batch that straddles it goes whole) and the index entries past them. Returns the
    /// bytes removed.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let start = self.index_position(offset);
        let mut scanner = BatchScanner::new(&self.log, start, self.size);
        let mut cut = self.size;
        while let Some((position, header)) = scanner.next_header()? {
            if header.last_offset() >= offset {
                cut = position;
                break;
            }
        }
        self.offset_index.truncate_to(offset);
        self.time_index.truncate_to(offset);
        self.txn_index.truncate_to(offset)?;
        let removed = self.size - cut;
        if removed > 0 {
            self.log.set_len(cut)?;
            self.size = cut;
        }
        let last_time = self.time_index.last_entry();
        self.max_timestamp_so_far = last_time.timestamp;
        self.offset_of_max_timestamp_so_far = last_time.offset;
        self.bytes_since_last_index_entry = 0;
        self.rolling_based_timestamp = if self.size == 0 {
            None
        } else {
            BatchScanner::new(&self.log, 0, self.size)
                .next_header()?
                .map(|(_, h)| h.max_timestamp)
        };
        Ok(removed)
    }

    /// Seals the segment when a newer one takes over: final time-index entry, trimmed indexes.
    pub(crate) fn on_become_inactive(&mut self) -> io::Result<()> {
        if self.max_timestamp_so_far != NO_TIMESTAMP {
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
            );
        }
        self.offset_index.file().trim_to_valid_size()?;
        self.time_index.file().trim_to_valid_size()
    }

    /// Preallocates the indexes again so the segment can take appends.
    pub(crate) fn prepare_for_appends(&mut self, config: &LogConfig) -> io::Result<()> {
        self.offset_index.file().resize(config.max_index_bytes())?;
        self.time_index.file().resize(config.max_index_bytes())
    }

    /// The open `.log` file, to fsync.
    pub(crate) fn log_handle(&self) -> Arc<File> {
        Arc::clone(&self.log)
    }

    /// The index files, to fsync by path (a mapped index keeps no descriptor); the
    /// `.txnindex` only once it has an entry (its file is created with the first).
    pub(crate) fn index_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
        ];
        if !self.txn_index.entries().is_empty() {
            paths.push(self.txn_index.path().to_path_buf());
        }
        paths
    }

    /// Kafka's `changeFileSuffixes("", ".deleted")`: renames the segment's files (those that
    /// exist) to `<name>.deleted` and returns their new paths. Readers holding the `.log`
    /// descriptor keep reading it; the mapped indexes are released with the segment.
    pub(crate) fn rename_for_deletion(self) -> io::Result<Vec<PathBuf>> {
        let mut renamed = Vec::with_capacity(4);
        for path in self.file_paths() {
            let target = deleted_path(&path);
            match std::fs::rename(&path, &target) {
                Ok(()) => renamed.push(target),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(renamed)
    }

    /// Records an aborted transaction whose marker this segment holds (Kafka's
    /// `updateTxnIndex`); committed ones need no entry.
    pub(crate) fn append_aborted_txn(
        &mut self,
        txn: &CompletedTxn,
        last_stable_offset: i64,
    ) -> io::Result<()> {
        if !txn.aborted {
            return Ok(());
        }
        self.txn_index.append(AbortedTxnEntry {
            producer_id: txn.producer_id,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            last_stable_offset,
        })
    }

    /// Removes the segment's files.
    pub(crate) fn delete_files(self) -> io::Result<()> {
        for path in self.file_paths() {
            remove_if_present(&path)?;
        }
        Ok(())
    }

    /// Every file of the segment, present or not.
    fn file_paths(&self) -> [PathBuf; 4] {
        [
            self.log_path.clone(),
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
            self.txn_index.path().to_path_buf(),
        ]
    }
}
