//! Where the Raft log's batches and vote live: the metadata log (`KafkaLogBackend`, a
//! krust-storage `Log` and its `quorum-state` file), or memory (`MemLogBackend`, for the
//! simulation tests; it survives a simulated crash because the test keeps it).

use std::collections::BTreeMap;
use std::io;

use bytes::Bytes;
use krust_storage::batch::{split_batches, BatchHeader};
use krust_storage::log_manager::SharedLog;

use krust_storage::kraft_snapshot;

use crate::{invalid_data, quorum_state, LogId, NodeId, Vote};

/// Storage of encoded entries (record batches, offset = index) and of the vote.
pub trait LogBackend: Send + 'static {
    /// The offset of the first entry kept.
    fn start_offset(&self) -> u64;
    /// The offset the next entry gets.
    fn end_offset(&self) -> u64;
    /// Appends `batches`, whose first entry is at `end_offset()`, not yet durable.
    fn append(&mut self, batches: Bytes) -> io::Result<()>;
    /// Makes every append so far durable.
    fn flush(&mut self) -> io::Result<()>;
    /// Whole batches holding the offsets from `from` on (the first may start before it),
    /// at least one batch if any, at most about `max_bytes` after it.
    fn read(&self, from: u64, max_bytes: usize) -> io::Result<Bytes>;
    /// Removes the entries from `offset` on (durably).
    fn truncate_from(&mut self, offset: u64) -> io::Result<()>;
    /// Raft no longer needs the entries up to `log_id` (they are in a snapshot).
    fn purge_to(&mut self, log_id: LogId) -> io::Result<()>;
    /// The log id of the entry just below `start_offset()`, when that is above 0.
    fn last_purged(&self) -> io::Result<Option<LogId>>;
    fn read_vote(&self) -> io::Result<Option<Vote>>;
    /// Saves the vote durably.
    fn save_vote(&mut self, vote: &Vote, voters: &[NodeId]) -> io::Result<()>;
    /// The entries below `end` are committed: the log's high watermark (Kafka's
    /// KafkaMetadataLog.updateHighWatermark), which retention may not pass.
    fn committed_to(&mut self, end: u64) {
        let _ = end;
    }
}

/// The metadata log `__cluster_metadata-0` in Kafka's format, the vote in `quorum-state`.
pub struct KafkaLogBackend {
    log: SharedLog,
}

impl KafkaLogBackend {
    pub fn new(log: SharedLog) -> Self {
        Self { log }
    }

    pub fn log(&self) -> &SharedLog {
        &self.log
    }
}

fn offset_u64(offset: i64) -> u64 {
    u64::try_from(offset).unwrap_or(0)
}

impl LogBackend for KafkaLogBackend {
    fn committed_to(&mut self, end: u64) {
        let end = i64::try_from(end).unwrap_or(i64::MAX);
        self.log.lock().maybe_increment_high_watermark(end);
    }

    fn start_offset(&self) -> u64 {
        offset_u64(self.log.lock().log_start_offset())
    }

    fn end_offset(&self) -> u64 {
        offset_u64(self.log.lock().log_end_offset())
    }

    /// The batches keep their offsets (the indexes), epochs (the terms) and timestamps, as a
    /// follower's copy of its leader's batches does.
    fn append(&mut self, batches: Bytes) -> io::Result<()> {
        let mut log = self.log.lock();
        let expected = log.log_end_offset();
        let first = BatchHeader::parse(&batches).map(|h| h.base_offset);
        if first != Some(expected) {
            return Err(io::Error::other(format!(
                "the metadata log ends at {expected} but the entry to append is at {first:?}"
            )));
        }
        let now_ms = crate::wall_clock_ms();
        log.append_as_follower(&batches, now_ms)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let task = self.log.lock().flush_task();
        if let Some(task) = task {
            task.run()?;
            self.log.lock().complete_flush(&task);
        }
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> io::Result<Bytes> {
        let plan = {
            let log = self.log.lock();
            let end = log.log_end_offset();
            let from = i64::try_from(from).map_err(|_| invalid_data("offset past i64"))?;
            if from >= end {
                return Ok(Bytes::new());
            }
            log.read_plan(from, end)
                .map_err(|e| io::Error::other(e.to_string()))?
        };
        let info = plan
            .read(max_bytes, true)
            .map_err(|e| io::Error::other(e.to_string()))?;
        info.records.read_bytes()
    }

    fn truncate_from(&mut self, offset: u64) -> io::Result<()> {
        let offset = i64::try_from(offset).map_err(|_| invalid_data("offset past i64"))?;
        let truncated = self
            .log
            .lock()
            .truncate_to(offset)
            .map_err(|e| io::Error::other(e.to_string()))?;
        if truncated {
            self.flush()?;
        }
        Ok(())
    }

    /// The metadata log keeps what `metadata.max.retention.*` keeps: its start offset moves
    /// to snapshot ends when a snapshot is written (docs/metadata-log.md), not here. Only a
    /// snapshot installed past the log's end empties it: the log goes on after the snapshot.
    fn purge_to(&mut self, log_id: LogId) -> io::Result<()> {
        let next = i64::try_from(log_id.index + 1).map_err(|_| invalid_data("offset past i64"))?;
        let mut log = self.log.lock();
        if next > log.log_end_offset() {
            log.truncate_fully_and_start_at(next)
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
        Ok(())
    }

    /// The log start moves only to a snapshot's end, and that snapshot stays: its epoch is
    /// the term of the entry below the start.
    fn last_purged(&self) -> io::Result<Option<LogId>> {
        let (dir, start) = {
            let log = self.log.lock();
            (log.dir().to_path_buf(), log.log_start_offset())
        };
        if start == 0 {
            return Ok(None);
        }
        let snapshots = kraft_snapshot::recover_snapshots(&dir, start)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let at_start = snapshots.iter().find(|id| id.end_offset == start);
        let id = at_start.ok_or_else(|| {
            io::Error::other(format!(
                "the metadata log starts at {start} but no snapshot ends there"
            ))
        })?;
        let term = u64::try_from(id.epoch).map_err(|_| invalid_data("negative epoch"))?;
        Ok(Some(LogId::new_term_index(term, offset_u64(start) - 1)))
    }

    fn read_vote(&self) -> io::Result<Option<Vote>> {
        let dir = self.log.lock().dir().to_path_buf();
        quorum_state::read(&dir)
    }

    fn save_vote(&mut self, vote: &Vote, voters: &[NodeId]) -> io::Result<()> {
        let dir = self.log.lock().dir().to_path_buf();
        quorum_state::write(&dir, vote, voters)
    }
}

/// Entries and vote in memory; `flush` counts, so tests can see what was made durable.
#[derive(Default)]
pub struct MemLogBackend {
    start: u64,
    purged: Option<LogId>,
    batches: BTreeMap<u64, Bytes>,
    vote: Option<Vote>,
    /// Offset below which the entries were flushed.
    pub flushed_end: u64,
}

impl MemLogBackend {
    /// Simulates a crash: what was not flushed is lost.
    pub fn crash(&mut self) {
        let keep = self.flushed_end;
        self.batches.retain(|offset, _| *offset < keep);
    }
}

impl LogBackend for MemLogBackend {
    fn start_offset(&self) -> u64 {
        self.start
    }

    fn end_offset(&self) -> u64 {
        self.batches
            .last_key_value()
            .map_or(self.start, |(offset, _)| offset + 1)
    }

    fn append(&mut self, batches: Bytes) -> io::Result<()> {
        for range in split_batches(&batches).map_err(|e| invalid_data(e.to_string()))? {
            let batch = batches.slice(range);
            let header = BatchHeader::parse(&batch).ok_or_else(|| invalid_data("short batch"))?;
            let expected = self.end_offset();
            if offset_u64(header.base_offset) != expected || header.last_offset_delta != 0 {
                return Err(io::Error::other(format!(
                    "the log ends at {expected} but the batch is at {}",
                    header.base_offset
                )));
            }
            self.batches.insert(expected, batch);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flushed_end = self.end_offset();
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> io::Result<Bytes> {
        let mut out = Vec::new();
        for batch in self.batches.range(from..).map(|(_, b)| b) {
            if !out.is_empty() && out.len() + batch.len() > max_bytes {
                break;
            }
            out.extend_from_slice(batch);
        }
        Ok(Bytes::from(out))
    }

    fn truncate_from(&mut self, offset: u64) -> io::Result<()> {
        self.batches.split_off(&offset);
        self.flushed_end = self.flushed_end.min(self.end_offset());
        Ok(())
    }

    fn purge_to(&mut self, log_id: LogId) -> io::Result<()> {
        let offset = log_id.index + 1;
        self.batches = self.batches.split_off(&offset);
        if offset > self.start {
            self.start = offset;
            self.purged = Some(log_id);
        }
        Ok(())
    }

    fn last_purged(&self) -> io::Result<Option<LogId>> {
        Ok(self.purged)
    }

    fn read_vote(&self) -> io::Result<Option<Vote>> {
        Ok(self.vote)
    }

    fn save_vote(&mut self, vote: &Vote, _voters: &[NodeId]) -> io::Result<()> {
        self.vote = Some(*vote);
        Ok(())
    }
}
