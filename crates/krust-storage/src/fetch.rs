//! Reading a log: Fetch (whole batches from a file position) and ListOffsets by timestamp.
//!
//! A read is planned under the log's lock (segment lookup, sparse-index position, committed
//! file size, an `Arc<File>`) and executed outside it with positional reads, so a slow disk
//! read never blocks producers. Bytes below a planned size never change: segments are only
//! appended to while the broker runs.

use std::fs::File;
use std::sync::Arc;

use crate::batch::NO_TIMESTAMP;
use crate::error::ReadError;
use crate::file_records::{BatchScanner, FileSlice};
use crate::log::Log;
use crate::segment::TimestampAndOffset;
use crate::txn_index::AbortedTxn;

/// What a fetch returns.
#[derive(Clone, Debug)]
pub struct FetchDataInfo {
    /// Whole batches exactly as stored, left in the segment file; empty when nothing is readable.
    pub records: FileSlice,
    /// Base offset of the first returned batch (may precede the fetch offset: clients skip).
    pub first_batch_offset: Option<i64>,
    /// The offset after the last returned batch (the fetch offset when nothing is returned).
    pub next_offset: i64,
}

impl FetchDataInfo {
    fn empty(offset: i64) -> Self {
        Self {
            records: FileSlice::empty(),
            first_batch_offset: None,
            next_offset: offset,
        }
    }
}

struct SegmentSlice {
    file: Arc<File>,
    start: u64,
    end: u64,
}

/// A fetch resolved to file ranges; `read` performs it without the log's lock.
pub struct ReadPlan {
    start_offset: i64,
    max_offset_exclusive: i64,
    slices: Vec<SegmentSlice>,
}

impl ReadPlan {
    /// Reads whole batches holding offsets >= the start offset and < the plan's upper bound,
    /// up to `max_bytes`; with `min_one_batch` the first batch is returned even if larger
    /// (KIP-74), otherwise an oversized first batch yields nothing.
    pub fn read(&self, max_bytes: usize, min_one_batch: bool) -> Result<FetchDataInfo, ReadError> {
        for slice in &self.slices {
            let mut scanner = BatchScanner::new(&slice.file, slice.start, slice.end);
            let mut range: Option<(u64, u64)> = None;
            let mut first_batch_offset = None;
            let mut next_offset = self.start_offset;
            let mut reached_limit = false;
            while let Some((position, header)) = scanner.next_header()? {
                if header.last_offset() < self.start_offset {
                    continue;
                }
                if header.last_offset() >= self.max_offset_exclusive {
                    reached_limit = true;
                    break;
                }
                let end = position + header.size_in_bytes() as u64;
                let start = range.map_or(position, |(start, _)| start);
                let fits =
                    (end - start) as usize <= max_bytes || (range.is_none() && min_one_batch);
                if !fits {
                    reached_limit = true;
                    break;
                }
                range = Some((start, end));
                first_batch_offset.get_or_insert(header.base_offset);
                next_offset = header.last_offset() + 1;
            }
            if let Some((start, end)) = range {
                return Ok(FetchDataInfo {
                    records: FileSlice::new(Arc::clone(&slice.file), start, (end - start) as usize),
                    first_batch_offset,
                    next_offset,
                });
            }
            if reached_limit {
                break;
            }
        }
        Ok(FetchDataInfo::empty(self.start_offset))
    }
}

impl Log {
    fn check_fetch_offset(&self, offset: i64) -> Result<(), ReadError> {
        if self.closed {
            return Err(ReadError::LogClosed);
        }
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        Ok(())
    }

    /// Resolves a fetch at `start_offset`, bounded by `max_offset_exclusive` (the high
    /// watermark for consumers, the log end offset for followers), to file ranges.
    pub fn read_plan(
        &self,
        start_offset: i64,
        max_offset_exclusive: i64,
    ) -> Result<ReadPlan, ReadError> {
        self.check_fetch_offset(start_offset)?;
        let mut slices = Vec::new();
        if start_offset < self.log_end_offset {
            // The batch holding the offset is in the floor segment or, past a gap, in the first
            // later segment that holds a batch: a clean can leave segments empty (Kafka's
            // Log.read goes on from segment to segment the same way).
            let floor = self
                .segments
                .range(..=start_offset)
                .next_back()
                .map(|(base, _)| *base);
            let from = floor.unwrap_or(i64::MIN);
            for (i, (_, segment)) in self.segments.range(from..).enumerate() {
                let end = segment.size();
                slices.push(SegmentSlice {
                    file: Arc::clone(segment.log_file()),
                    start: if i == 0 {
                        segment.index_position(start_offset)
                    } else {
                        0
                    },
                    end,
                });
                if i > 0 && end > 0 {
                    break;
                }
            }
        }
        Ok(ReadPlan {
            start_offset,
            max_offset_exclusive,
            slices,
        })
    }

    /// Plans and performs a fetch in one call (holding whatever lock guards `self`).
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, ReadError> {
        self.read_plan(start_offset, max_offset_exclusive)?
            .read(max_bytes, min_one_batch)
    }

    /// The aborted transactions a read_committed fetch of [`start_offset`, `upper_bound`)
    /// must report (Kafka's `collectAbortedTransactions`): from the segment holding
    /// `start_offset` on, since a marker may lie in a later segment than its data, until an
    /// entry's last stable offset shows no later one can overlap.
    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound: i64,
    ) -> Vec<AbortedTxn> {
        let from = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        let mut aborted = Vec::new();
        for segment in self.segments.range(from..).map(|(_, s)| s) {
            let found = segment.txn_index.collect(start_offset, upper_bound);
            aborted.extend(found.aborted);
            if found.complete {
                break;
            }
        }
        aborted
    }

    /// ListOffsets by time: the first offset whose record timestamp is >= `timestamp`, or
    /// `None` if every record is older.
    pub fn fetch_offset_by_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampAndOffset>, ReadError> {
        if self.closed {
            return Err(ReadError::LogClosed);
        }
        for segment in self.segments.values() {
            if segment.max_timestamp_so_far() < timestamp {
                continue;
            }
            if let Some(found) =
                segment.find_offset_by_timestamp(timestamp, self.log_start_offset)?
            {
                return Ok(Some(TimestampAndOffset {
                    leader_epoch: self.leader_epoch_cache.epoch_for_offset(found.offset),
                    ..found
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (KIP-734): the first record carrying the log's largest
    /// timestamp, or `None` for an empty log.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampAndOffset>, ReadError> {
        let max_timestamp = self
            .segments
            .values()
            .map(|s| s.max_timestamp_so_far())
            .max()
            .unwrap_or(NO_TIMESTAMP);
        if max_timestamp == NO_TIMESTAMP {
            return Ok(None);
        }
        self.fetch_offset_by_timestamp(max_timestamp)
    }
}
