//! One batch through the cleaner (Kafka's `MemoryRecords.filterTo` with the cleaner's record
//! filter): a record stays if it has a key, is the latest offset of that key in the offset map
//! (or later than the map reaches), and is not a tombstone past its batch's delete horizon.
//!
//! Tombstones follow KIP-534: the first clean that keeps a tombstone stamps its batch with a
//! delete horizon (`now + delete.retention.ms`, in the base timestamp, attribute bit 6); a clean
//! after the horizon removes it. A batch that loses every record is dropped, unless it is its
//! producer's last one: then its header stays as an empty batch, so the producer's sequence and
//! epoch survive a reload (Kafka's `BatchRetention.RETAIN_EMPTY`).

use std::collections::HashMap;

use crate::batch::BatchHeader;
use crate::batch_builder::{build_batch, records_area, Codec, MAX_DECOMPRESSED_BYTES};
use crate::cleaner::offset_map::OffsetMap;
use crate::config::{LogConfig, TimestampType};
use crate::error::BatchError;
use crate::records::{put_varlong, record_views, RecordView};
use crate::txn_index::AbortedTxnEntry;

/// `RecordBatch`'s delete-horizon attribute (KIP-534).
pub(crate) const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The delete horizon a batch carries, if any.
pub(crate) fn delete_horizon(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_FLAG != 0).then_some(header.base_timestamp)
}

/// What the cleaner decides for one log.
pub(crate) struct FilterContext<'a> {
    pub map: &'a OffsetMap,
    pub now_ms: i64,
    pub config: &'a LogConfig,
    /// Each producer's last data offset (the producer state's).
    pub last_offset_of_producer: &'a HashMap<i64, i64>,
    /// The log's aborted transactions: their records are discarded.
    pub aborted_txns: &'a [AbortedTxnEntry],
}

/// A transactional data batch of an aborted transaction: one of its producer's that lies
/// between the transaction's first offset and its ABORT marker (Kafka's cleaner discards it).
pub(crate) fn is_aborted(aborted_txns: &[AbortedTxnEntry], header: &BatchHeader) -> bool {
    header.is_transactional()
        && !header.is_control()
        && aborted_txns.iter().any(|txn| {
            txn.producer_id == header.producer_id
                && txn.first_offset <= header.base_offset
                && header.last_offset() < txn.last_offset
        })
}

/// What becomes of a batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Filtered {
    /// Stored again byte for byte.
    Keep,
    Drop,
    Rewrite(Vec<u8>),
}

#[derive(Debug)]
pub(crate) struct FilterResult {
    pub filtered: Filtered,
    pub records_read: usize,
    pub records_retained: usize,
    /// The delete horizon of a batch that keeps tombstones.
    pub tombstone_horizon: Option<i64>,
}

/// Puts the offset of every keyed record of `bytes` (one whole batch) into `map`; the caller
/// made room for the batch's record count.
pub(crate) fn put_keys(
    bytes: &[u8],
    header: &BatchHeader,
    map: &mut OffsetMap,
) -> Result<(), BatchError> {
    let area = records_area(bytes, header, MAX_DECOMPRESSED_BYTES)?;
    for record in record_views(&area) {
        let record = record?;
        if let Some(key) = record.key {
            map.put(key, header.base_offset + i64::from(record.offset_delta));
        }
    }
    Ok(())
}

/// Filters one whole batch read from a segment.
pub(crate) fn filter_batch(
    bytes: &[u8],
    header: &BatchHeader,
    context: &FilterContext<'_>,
) -> Result<FilterResult, BatchError> {
    if header.is_control() {
        // Transaction markers stay, with their `.txnindex` entries, so aborted records the
        // cleaner has not removed yet stay hidden.
        return Ok(FilterResult {
            filtered: Filtered::Keep,
            records_read: 0,
            records_retained: 0,
            tombstone_horizon: None,
        });
    }
    if is_aborted(context.aborted_txns, header) {
        return Ok(FilterResult {
            filtered: discard(header, context)?,
            records_read: usize::try_from(header.records_count).unwrap_or(0),
            records_retained: 0,
            tombstone_horizon: None,
        });
    }
    let area = records_area(bytes, header, MAX_DECOMPRESSED_BYTES)?;
    let horizon = delete_horizon(header);
    let horizon_passed = horizon.is_some_and(|h| context.now_ms >= h);
    let mut retained: Vec<RecordView<'_>> = Vec::new();
    let mut records_read = 0;
    for record in record_views(&area) {
        let record = record?;
        records_read += 1;
        let Some(key) = record.key else { continue };
        let offset = header.base_offset + i64::from(record.offset_delta);
        let latest = context.map.get(key).is_none_or(|found| offset >= found);
        if latest && !(record.is_tombstone() && horizon_passed) {
            retained.push(record);
        }
    }
    let has_tombstones = retained.iter().any(|r| r.is_tombstone());
    let new_horizon = (has_tombstones && horizon.is_none()).then(|| {
        context
            .now_ms
            .saturating_add(context.config.delete_retention_ms)
    });
    let tombstone_horizon = if has_tombstones {
        horizon.or(new_horizon)
    } else {
        None
    };
    let result = |filtered| FilterResult {
        filtered,
        records_read,
        records_retained: retained.len(),
        tombstone_horizon,
    };
    if retained.len() == records_read && new_horizon.is_none() {
        return Ok(result(Filtered::Keep));
    }
    if retained.is_empty() {
        return Ok(result(discard(header, context)?));
    }
    let rebuilt = rebuild(header, &retained, new_horizon, context.config)?;
    Ok(result(Filtered::Rewrite(rebuilt)))
}

/// A batch that keeps no record goes, unless it is its producer's last one.
fn discard(header: &BatchHeader, context: &FilterContext<'_>) -> Result<Filtered, BatchError> {
    let producers_last = header.has_producer_id()
        && context.last_offset_of_producer.get(&header.producer_id) == Some(&header.last_offset());
    if producers_last {
        return Ok(Filtered::Rewrite(empty_batch(header)?));
    }
    Ok(Filtered::Drop)
}

/// The batch's header with no records: offsets, producer id, epoch and sequence kept.
fn empty_batch(header: &BatchHeader) -> Result<Vec<u8>, BatchError> {
    let empty = BatchHeader {
        records_count: 0,
        base_timestamp: header.max_timestamp,
        attributes: header.attributes & !DELETE_HORIZON_FLAG,
        ..*header
    };
    build_batch(&empty, &[], Codec::NONE).map_err(|e| BatchError::InvalidRecord(e.to_string()))
}

/// The retained records in a new batch of the same codec; record timestamps are kept, so their
/// deltas are re-based when the delete horizon becomes the base timestamp.
fn rebuild(
    header: &BatchHeader,
    retained: &[RecordView<'_>],
    new_horizon: Option<i64>,
    config: &LogConfig,
) -> Result<Vec<u8>, BatchError> {
    let timestamp = |r: &RecordView<'_>| header.base_timestamp.saturating_add(r.timestamp_delta);
    let base_timestamp = new_horizon.unwrap_or(header.base_timestamp);
    let mut area = Vec::new();
    for record in retained {
        push_record(&mut area, record, timestamp(record) - base_timestamp);
    }
    let max_timestamp = match header.timestamp_type() {
        TimestampType::LogAppendTime => header.max_timestamp,
        TimestampType::CreateTime => retained.iter().map(timestamp).max().unwrap_or(-1),
    };
    let attributes = match new_horizon {
        Some(_) => header.attributes | DELETE_HORIZON_FLAG,
        None => header.attributes,
    };
    let rebuilt = BatchHeader {
        records_count: retained.len() as i32,
        base_timestamp,
        max_timestamp,
        attributes,
        ..*header
    };
    let codec = Codec::with_topic_level(header.compression(), config);
    build_batch(&rebuilt, &area, codec).map_err(|e| BatchError::InvalidRecord(e.to_string()))
}

/// A record's bytes: length, attributes, timestamp delta, offset delta, then its stored tail.
fn push_record(out: &mut Vec<u8>, record: &RecordView<'_>, timestamp_delta: i64) {
    let mut body = vec![record.attributes];
    put_varlong(&mut body, timestamp_delta);
    put_varlong(&mut body, i64::from(record.offset_delta));
    body.extend_from_slice(record.tail);
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}
