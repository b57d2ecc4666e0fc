//! The record batches of a Fetch response (any codec) into [`RecordColumns`].

use std::ops::Range;

use krust_storage::batch::{check_integrity, declared_size};
use krust_storage::config::TimestampType;
use krust_storage::records::record_views;
use krust_storage::{records_area, BatchError, MAX_DECOMPRESSED_BYTES};

use crate::columns::{ConsumedRecord, RecordColumns};
use crate::transactions::AbortedTransactions;

/// What one Fetch response's records yielded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The offset after the last whole batch read: where the next fetch starts.
    pub next_offset: Option<i64>,
}

/// Appends the records of `records` (concatenated batches, the last possibly cut short as
/// Fetch allows) whose offsets fall in `range`. Control batches (transaction markers) are
/// skipped, as consumers never see them, and so are batches of `aborted` transactions.
pub fn append_records(
    records: &[u8],
    topic: &str,
    partition: i32,
    range: &Range<i64>,
    aborted: &mut AbortedTransactions,
    columns: &mut RecordColumns,
) -> Result<Decoded, BatchError> {
    let mut next_offset = None;
    let mut rest = records;
    while let Some(size) = declared_size(rest) {
        let size = size?;
        if size > rest.len() {
            break;
        }
        let (batch, after) = rest.split_at(size);
        rest = after;
        let header = check_integrity(batch)?;
        next_offset = Some(header.last_offset() + 1);
        if aborted.skips(&header, batch)? || header.last_offset() < range.start {
            continue;
        }
        let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
        let area = records_area(batch, &header, MAX_DECOMPRESSED_BYTES)?;
        for view in record_views(&area) {
            let view = view?;
            let offset = header.base_offset + i64::from(view.offset_delta);
            if offset < range.start {
                continue;
            }
            if offset >= range.end {
                break;
            }
            let record = ConsumedRecord {
                offset,
                timestamp_ms: if log_append_time {
                    header.max_timestamp
                } else {
                    header.base_timestamp.saturating_add(view.timestamp_delta)
                },
                timestamp_type: i32::from(log_append_time),
                key: view.key,
                value: view.value,
            };
            columns.push(topic, partition, &record, view.headers())?;
        }
    }
    Ok(Decoded { next_offset })
}

#[cfg(test)]
mod tests {
    use krust_storage::batch::{BatchHeader, MAGIC_V2};
    use krust_storage::{build_batch, Codec};

    use super::*;

    fn none() -> AbortedTransactions {
        AbortedTransactions::new([])
    }

    /// One uncompressed batch at `base_offset` of `count` records "v0".. (keyed `key` when
    /// given) with `attributes` (timestamp type, transactional, control) from `producer_id`.
    fn batch_from(
        base_offset: i64,
        count: i32,
        attributes: i16,
        producer_id: i64,
        key: Option<&[u8]>,
    ) -> Vec<u8> {
        use krust_storage::records::put_varlong;
        let mut area = Vec::new();
        for i in 0..count {
            let value = format!("v{i}");
            let mut body = vec![0u8];
            put_varlong(&mut body, i64::from(i) * 10);
            put_varlong(&mut body, i64::from(i));
            match key {
                Some(key) => {
                    put_varlong(&mut body, key.len() as i64);
                    body.extend_from_slice(key);
                }
                None => put_varlong(&mut body, -1),
            }
            put_varlong(&mut body, value.len() as i64);
            body.extend_from_slice(value.as_bytes());
            put_varlong(&mut body, 0);
            put_varlong(&mut area, body.len() as i64);
            area.extend_from_slice(&body);
        }
        let header = BatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: MAGIC_V2,
            crc: 0,
            attributes,
            last_offset_delta: count - 1,
            base_timestamp: 1_000,
            max_timestamp: 5_000,
            producer_id,
            producer_epoch: if producer_id < 0 { -1 } else { 0 },
            base_sequence: if producer_id < 0 { -1 } else { 0 },
            records_count: count,
        };
        build_batch(&header, &area, Codec::NONE).unwrap()
    }

    fn batch(base_offset: i64, count: i32, attributes: i16) -> Vec<u8> {
        batch_from(base_offset, count, attributes, -1, None)
    }

    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;

    /// A transaction marker of `producer_id` at `offset`: key version 0, type 0 abort or
    /// 1 commit.
    fn marker(offset: i64, producer_id: i64, commit: bool) -> Vec<u8> {
        let key = [0, 0, 0, u8::from(commit)];
        batch_from(offset, 1, TRANSACTIONAL | CONTROL, producer_id, Some(&key))
    }

    fn offsets(columns: &mut RecordColumns) -> Vec<i64> {
        offsets_and_timestamps(columns)
            .iter()
            .map(|r| r.0)
            .collect()
    }

    #[test]
    fn read_committed_leaves_out_aborted_transactions_only() {
        // Producer 7 aborts offsets 0-1, producer 8 commits 3-4 interleaved with a plain
        // record at 5, then producer 7 writes again (a new transaction) at 7.
        let mut records = batch_from(0, 2, TRANSACTIONAL, 7, None);
        records.extend(marker(2, 7, false));
        records.extend(batch_from(3, 2, TRANSACTIONAL, 8, None));
        records.extend(batch(5, 1, 0));
        records.extend(marker(6, 8, true));
        records.extend(batch_from(7, 1, TRANSACTIONAL, 7, None));
        let mut columns = RecordColumns::new(false);
        let mut aborted = AbortedTransactions::new([(7, 0)]);
        append_records(&records, "t", 0, &(0..100), &mut aborted, &mut columns).unwrap();
        assert_eq!(offsets(&mut columns), [3, 4, 5, 7]);

        let mut uncommitted = RecordColumns::new(false);
        append_records(&records, "t", 0, &(0..100), &mut none(), &mut uncommitted).unwrap();
        assert_eq!(offsets(&mut uncommitted), [0, 1, 3, 4, 5, 7]);
    }

    fn offsets_and_timestamps(columns: &mut RecordColumns) -> Vec<(i64, i64, i32)> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
        let out = columns.finish();
        let offsets = out.column(4).as_primitive::<Int64Type>();
        let timestamps = out.column(5).as_primitive::<TimestampMicrosecondType>();
        let types = out.column(6).as_primitive::<Int32Type>();
        (0..out.num_rows())
            .map(|i| (offsets.value(i), timestamps.value(i), types.value(i)))
            .collect()
    }

    #[test]
    fn control_batches_are_skipped_and_a_cut_batch_ends_the_response() {
        let mut records = batch(0, 2, 0);
        records.extend(batch(2, 1, CONTROL));
        records.extend(batch(3, 2, 0));
        let cut = batch(5, 3, 0);
        records.extend_from_slice(&cut[..cut.len() - 4]);
        let mut columns = RecordColumns::new(false);
        let decoded =
            append_records(&records, "t", 0, &(0..100), &mut none(), &mut columns).unwrap();
        assert_eq!(decoded.next_offset, Some(5));
        let rows = offsets_and_timestamps(&mut columns);
        let offsets: Vec<i64> = rows.iter().map(|r| r.0).collect();
        assert_eq!(offsets, [0, 1, 3, 4]);
        assert_eq!(
            rows[1].1, 1_010_000,
            "base timestamp + delta, in microseconds"
        );
    }

    #[test]
    fn log_append_time_batches_give_the_batch_timestamp() {
        let log_append_time = 0x08;
        let mut columns = RecordColumns::new(false);
        append_records(
            &batch(0, 2, log_append_time),
            "t",
            0,
            &(0..2),
            &mut none(),
            &mut columns,
        )
        .unwrap();
        let rows = offsets_and_timestamps(&mut columns);
        assert_eq!(rows, [(0, 5_000_000, 1), (1, 5_000_000, 1)]);
    }

    #[test]
    fn a_corrupt_batch_is_an_error() {
        let mut records = batch(0, 2, 0);
        let last = records.len() - 1;
        records[last] ^= 0xff;
        let mut columns = RecordColumns::new(false);
        let error =
            append_records(&records, "t", 0, &(0..2), &mut none(), &mut columns).unwrap_err();
        assert!(matches!(error, BatchError::CrcMismatch { .. }), "{error}");
    }

    #[test]
    fn the_range_end_is_exclusive() {
        let mut columns = RecordColumns::new(false);
        append_records(
            &batch(10, 5, 0),
            "t",
            0,
            &(11..13),
            &mut none(),
            &mut columns,
        )
        .unwrap();
        let offsets: Vec<i64> = offsets_and_timestamps(&mut columns)
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(offsets, [11, 12]);
    }
}
