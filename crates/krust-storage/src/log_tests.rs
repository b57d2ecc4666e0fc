//! Behaviour of `Log` as the Produce / Fetch / ListOffsets handlers see it.

use std::path::Path;

use proptest::prelude::*;

use crate::batch::test_batches::TestBatch;
use crate::batch::{check_integrity, BatchHeader, Compression};
use crate::config::{LogConfig, TimestampType};
use crate::log::{LoadParams, Log};
use crate::offset_index::OffsetIndex;
use crate::topic_partition::TopicPartition;

pub(crate) const NOW: i64 = 1_700_000_000_000;

pub(crate) fn open_log(dir: &Path, config: LogConfig) -> Log {
    open_log_with(dir, config, LoadParams::default())
}

pub(crate) fn open_log_with(dir: &Path, config: LogConfig, params: LoadParams) -> Log {
    Log::open(
        &dir.join("t-0"),
        TopicPartition::new("t", 0),
        None,
        config,
        params,
        NOW,
    )
    .unwrap()
}

/// Splits fetched bytes into (header, bytes) per batch, checking each CRC.
pub(crate) fn batches_of(records: &[u8]) -> Vec<(BatchHeader, Vec<u8>)> {
    crate::batch::split_batches(records)
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                check_integrity(&records[r.clone()]).unwrap(),
                records[r].to_vec(),
            )
        })
        .collect()
}

/// Reads the whole log batch by batch.
pub(crate) fn read_all(log: &Log) -> Vec<(BatchHeader, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let fetched = log.read(offset, 1, i64::MAX, true).unwrap();
        let batches = batches_of(&fetched.records.read_bytes().unwrap());
        assert_eq!(batches.len(), 1);
        offset = batches[0].0.last_offset() + 1;
        out.extend(batches);
    }
    out
}

fn without_patched_fields(bytes: &[u8]) -> Vec<u8> {
    let mut copy = bytes.to_vec();
    copy[..8].fill(0);
    copy[12..16].fill(0);
    copy
}

#[test]
fn stored_batches_are_byte_identical_except_offset_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    let produced: Vec<Vec<u8>> = (1..=4)
        .map(|n| TestBatch::simple(n, NOW + n as i64).encode())
        .collect();
    let mut expected_first = 0;
    for batch in &produced {
        let info = log.append_as_leader(batch, 7, NOW).unwrap();
        assert_eq!(info.first_offset, expected_first);
        assert!(!info.duplicate);
        assert_eq!(info.log_append_time, -1);
        expected_first = info.last_offset + 1;
    }
    assert_eq!(log.log_end_offset(), 1 + 2 + 3 + 4);
    let fetched = log.read(0, usize::MAX, i64::MAX, false).unwrap();
    let stored = batches_of(&fetched.records.read_bytes().unwrap());
    assert_eq!(stored.len(), produced.len());
    let mut next = 0;
    for ((header, bytes), original) in stored.iter().zip(&produced) {
        assert_eq!(
            without_patched_fields(bytes),
            without_patched_fields(original)
        );
        assert_eq!(header.base_offset, next);
        assert_eq!(header.partition_leader_epoch, 7);
        next = header.last_offset() + 1;
    }
    assert_eq!(log.latest_epoch(), Some(7));
}

#[test]
fn several_batches_in_one_request_get_consecutive_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    let mut request = TestBatch::simple(2, NOW).encode();
    request.extend(TestBatch::simple(3, NOW).encode());
    let info = log.append_as_leader(&request, 0, NOW).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.record_count),
        (0, 4, 5)
    );
    let headers: Vec<_> = read_all(&log)
        .into_iter()
        .map(|(h, _)| h.base_offset)
        .collect();
    assert_eq!(headers, vec![0, 2]);
}

#[test]
fn a_retried_idempotent_batch_gets_its_original_offsets_and_is_not_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    log.append_as_leader(&TestBatch::simple(1, NOW).encode(), 0, NOW)
        .unwrap();
    let first = TestBatch::simple(3, NOW).idempotent(42, 0, 0).encode();
    let second = TestBatch::simple(2, NOW).idempotent(42, 0, 3).encode();
    let original = log.append_as_leader(&first, 0, NOW).unwrap();
    log.append_as_leader(&second, 0, NOW).unwrap();
    let size = log.size_in_bytes();
    let retry = log.append_as_leader(&first, 0, NOW).unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (original.first_offset, original.last_offset)
    );
    assert_eq!((retry.first_offset, retry.last_offset), (1, 3));
    assert_eq!(log.size_in_bytes(), size);
    assert_eq!(log.log_end_offset(), 6);

    let gap = TestBatch::simple(1, NOW).idempotent(42, 0, 9).encode();
    assert_eq!(
        log.append_as_leader(&gap, 0, NOW)
            .unwrap_err()
            .kafka_error_code(),
        45
    );
    let bumped = TestBatch::simple(1, NOW).idempotent(42, 1, 0).encode();
    log.append_as_leader(&bumped, 0, NOW).unwrap();
    let fenced = TestBatch::simple(1, NOW).idempotent(42, 0, 5).encode();
    assert_eq!(
        log.append_as_leader(&fenced, 0, NOW)
            .unwrap_err()
            .kafka_error_code(),
        47
    );
    assert_eq!(log.log_end_offset(), 7);
}

#[test]
fn log_append_time_rewrites_max_timestamp_with_a_valid_crc() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    let produced = TestBatch::simple(3, 5).encode();
    let info = log.append_as_leader(&produced, 0, NOW).unwrap();
    assert_eq!(info.log_append_time, NOW);
    let (header, bytes) = read_all(&log).remove(0);
    assert_eq!(header.max_timestamp, NOW);
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(header.base_timestamp, 5);
    assert!(check_integrity(&bytes).is_ok());
    assert_eq!(&bytes[61..], &produced[61..]);
}

#[test]
fn a_wrong_max_timestamp_from_the_producer_is_corrected() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    let mut produced = TestBatch::simple(3, NOW).encode();
    crate::batch::set_max_timestamp(&mut produced, TimestampType::CreateTime, NOW - 50);
    log.append_as_leader(&produced, 0, NOW).unwrap();
    let (header, _) = read_all(&log).remove(0);
    assert_eq!(header.max_timestamp, NOW + 2);
}

#[test]
fn rejected_appends_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    let mut corrupt = TestBatch::simple(2, NOW).encode();
    corrupt[70] ^= 0xff;
    assert_eq!(
        log.append_as_leader(&corrupt, 0, NOW)
            .unwrap_err()
            .kafka_error_code(),
        2
    );
    assert_eq!((log.log_end_offset(), log.size_in_bytes()), (0, 0));
}

#[test]
fn fetch_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    for n in [3, 3, 3] {
        log.append_as_leader(&TestBatch::simple(n, NOW).encode(), 0, NOW)
            .unwrap();
    }
    let one_batch = read_all(&log)[0].1.len();
    // An offset inside a batch returns that whole batch.
    let inside = log.read(4, usize::MAX, i64::MAX, false).unwrap();
    assert_eq!(inside.first_batch_offset, Some(3));
    assert_eq!(inside.next_offset, 9);
    // The log end offset reads as empty; past it is out of range.
    assert!(log
        .read(9, 1000, i64::MAX, true)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        log.read(10, 1000, i64::MAX, true)
            .unwrap_err()
            .kafka_error_code(),
        1
    );
    assert_eq!(
        log.read(-1, 1000, i64::MAX, true)
            .unwrap_err()
            .kafka_error_code(),
        1
    );
    // The high watermark hides batches not entirely below it.
    let below_hw = log.read(0, usize::MAX, 5, false).unwrap();
    assert_eq!(batches_of(&below_hw.records.read_bytes().unwrap()).len(), 1);
    assert!(log
        .read(3, usize::MAX, 5, false)
        .unwrap()
        .records
        .is_empty());
    // max_bytes: whole batches only; KIP-74 returns one oversized first batch on request.
    let limited = log.read(0, 2 * one_batch + 1, i64::MAX, false).unwrap();
    assert_eq!(batches_of(&limited.records.read_bytes().unwrap()).len(), 2);
    assert!(log.read(0, 10, i64::MAX, false).unwrap().records.is_empty());
    assert_eq!(
        log.read(0, 10, i64::MAX, true).unwrap().records.len(),
        one_batch
    );
}

#[test]
fn read_plan_serves_a_fetch_after_the_lock_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    let plan = log.read_plan(0, i64::MAX).unwrap();
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    let fetched = plan.read(usize::MAX, true).unwrap();
    assert_eq!(batches_of(&fetched.records.read_bytes().unwrap()).len(), 1);
}

#[test]
fn rolls_on_segment_bytes_with_contiguous_offsets_and_kafka_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let batch_size = TestBatch::simple(2, NOW).encode().len();
    let config = LogConfig {
        segment_bytes: (batch_size * 3) as i32,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    for _ in 0..10 {
        log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
            .unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 6, 12, 18]);
    let partition_dir = dir.path().join("t-0");
    for name in [
        "00000000000000000006.log",
        "00000000000000000006.index",
        "00000000000000000006.timeindex",
    ] {
        assert!(partition_dir.join(name).exists(), "{name}");
    }
    // A rolled segment's producer snapshot and trimmed indexes.
    assert!(partition_dir.join("00000000000000000006.snapshot").exists());
    assert_eq!(
        std::fs::metadata(partition_dir.join("00000000000000000000.index"))
            .unwrap()
            .len(),
        0
    );
    let offsets: Vec<i64> = read_all(&log).iter().map(|(h, _)| h.base_offset).collect();
    assert_eq!(offsets, (0..10).map(|i| i * 2).collect::<Vec<_>>());
}

#[test]
fn rolls_on_segment_age_measured_from_the_first_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    log.append_as_leader(&TestBatch::simple(1, NOW).encode(), 0, NOW)
        .unwrap();
    log.append_as_leader(&TestBatch::simple(1, NOW + 1000).encode(), 0, NOW)
        .unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(&TestBatch::simple(1, NOW + 1001).encode(), 0, NOW)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn segment_jitter_brings_the_time_based_roll_forward() {
    // Each segment draws its jitter in [0, 1000): with segment.ms 1000, a batch exactly
    // segment.ms after the first rolls unless the draw was 0 (in all five logs: 1 in 10^15).
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        segment_jitter_ms: 1000,
        ..LogConfig::default()
    };
    let rolled = (0..5)
        .filter(|i| {
            let mut log = open_log(&dir.path().join(i.to_string()), config.clone());
            for timestamp in [NOW, NOW + 1000] {
                log.append_as_leader(&TestBatch::simple(1, timestamp).encode(), 0, NOW)
                    .unwrap();
            }
            log.segment_count() == 2
        })
        .count();
    assert!(rolled > 0);
}

#[test]
fn rolls_when_an_index_is_full_and_index_entries_point_at_their_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_index_bytes: 24,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    for i in 0..12 {
        log.append_as_leader(&TestBatch::simple(2, NOW + i).encode(), 0, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 2);
    let bases = log.segment_base_offsets();
    let partition_dir = dir.path().join("t-0");
    for base in &bases[..bases.len() - 1] {
        // What DumpLogSegments verifies: each entry names the last offset of the batch at
        // its position.
        let path = crate::segment::offset_file_path(&partition_dir, *base, ".index");
        let index = OffsetIndex::open(&path, *base, None).unwrap();
        assert!(index.entries() > 0);
        let log_bytes = std::fs::read(crate::segment::offset_file_path(
            &partition_dir,
            *base,
            ".log",
        ))
        .unwrap();
        for i in 0..index.entries() {
            let entry = index.entry(i);
            let header = BatchHeader::parse(&log_bytes[entry.position as usize..]).unwrap();
            assert_eq!(header.last_offset(), entry.offset);
        }
    }
    assert_eq!(read_all(&log).len(), 12);
}

#[test]
fn index_files_appear_when_the_first_entry_is_due_and_after_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    let partition_dir = dir.path().join("t-0");
    let index_files = || {
        [".index", ".timeindex"].map(|suffix| {
            crate::segment::offset_file_path(&partition_dir, 0, suffix)
                .metadata()
                .map(|m| m.len())
                .ok()
        })
    };
    let mut log = open_log(dir.path(), config.clone());
    let batch = TestBatch::simple(2, NOW).encode();
    log.append_as_leader(&batch, 0, NOW).unwrap();
    assert_eq!(index_files(), [None, None], "no entry is due yet");

    while log.segment_count() == 1 && index_files()[0].is_none() {
        log.append_as_leader(&batch, 0, NOW).unwrap();
    }
    let [Some(index), Some(time_index)] = index_files() else {
        panic!("index files missing once entries were due");
    };
    assert_eq!(index, config.max_index_bytes() / 8 * 8, "preallocated");
    assert_eq!(
        time_index,
        config.max_index_bytes() / 12 * 12,
        "preallocated"
    );

    let fresh = tempfile::tempdir().unwrap();
    let mut closed = open_log(fresh.path(), config);
    closed.close().unwrap();
    let fresh_dir = fresh.path().join("t-0");
    for suffix in [".index", ".timeindex"] {
        let path = crate::segment::offset_file_path(&fresh_dir, 0, suffix);
        assert_eq!(
            path.metadata().unwrap().len(),
            0,
            "{suffix} trimmed to no entries"
        );
    }
}

#[test]
fn offset_by_timestamp_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    for i in 0..5 {
        // Records at NOW + 10*i + {0, 1, 2}.
        log.append_as_leader(&TestBatch::simple(3, NOW + 10 * i).encode(), 4, NOW)
            .unwrap();
    }
    let found = log.fetch_offset_by_timestamp(NOW + 21).unwrap().unwrap();
    assert_eq!(
        (found.offset, found.timestamp, found.leader_epoch),
        (7, NOW + 21, Some(4))
    );
    let found = log.fetch_offset_by_timestamp(NOW + 23).unwrap().unwrap();
    assert_eq!(found.offset, 9);
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap().unwrap().offset, 0);
    assert!(log.fetch_offset_by_timestamp(NOW + 43).unwrap().is_none());
    let max = log.offset_of_max_timestamp().unwrap().unwrap();
    assert_eq!((max.offset, max.timestamp), (14, NOW + 42));
}

#[test]
fn offset_by_timestamp_finds_the_exact_record_inside_compressed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    for (i, codec) in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let batch = TestBatch::simple(3, NOW + 10 * i as i64).compressed(codec);
        log.append_as_leader(&batch.encode(), 0, NOW).unwrap();
    }
    for (timestamp, offset) in [(NOW + 1, 1), (NOW + 12, 5), (NOW + 21, 7), (NOW + 32, 11)] {
        let found = log.fetch_offset_by_timestamp(timestamp).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (offset, timestamp));
    }
}

#[test]
fn flush_messages_advances_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_interval_messages: 3,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config);
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    assert_eq!(log.recovery_point(), 0);
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    assert_eq!(log.recovery_point(), 4);
    assert_eq!(log.unflushed_messages(), 0);
}

#[test]
fn a_closed_and_reopened_log_has_the_same_content_and_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let mut log = open_log(dir.path(), config.clone());
    let mut last = Vec::new();
    for seq in 0..6 {
        last = TestBatch::simple(2, NOW).idempotent(9, 0, seq * 2).encode();
        log.append_as_leader(&last, 3, NOW).unwrap();
    }
    let before = read_all(&log);
    log.close().unwrap();
    assert_eq!(
        log.append_as_leader(&last, 3, NOW)
            .unwrap_err()
            .kafka_error_code(),
        56
    );
    let active_index = dir.path().join("t-0").join(format!(
        "{:020}.index",
        log.segment_base_offsets().last().unwrap()
    ));
    assert_eq!(std::fs::metadata(&active_index).unwrap().len() % 8, 0);
    drop(log);

    let params = LoadParams {
        had_clean_shutdown: true,
        ..LoadParams::default()
    };
    let mut reopened = open_log_with(dir.path(), config, params);
    assert_eq!(read_all(&reopened), before);
    assert_eq!(reopened.log_end_offset(), 12);
    assert_eq!(reopened.latest_epoch(), Some(3));
    let retry = reopened.append_as_leader(&last, 3, NOW).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, 10);
    let next = TestBatch::simple(1, NOW).idempotent(9, 0, 12).encode();
    assert_eq!(
        reopened
            .append_as_leader(&next, 3, NOW)
            .unwrap()
            .first_offset,
        12
    );
}

#[test]
fn topic_id_is_written_once_and_must_match() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let tp = TopicPartition::new("t", 0);
    let id = [7u8; 16];
    let log = Log::open(
        &path,
        tp.clone(),
        Some(id),
        LogConfig::default(),
        LoadParams::default(),
        NOW,
    )
    .unwrap();
    assert_eq!(log.topic_id(), Some(id));
    drop(log);
    let again = Log::open(
        &path,
        tp.clone(),
        None,
        LogConfig::default(),
        LoadParams::default(),
        NOW,
    )
    .unwrap();
    assert_eq!(again.topic_id(), Some(id));
    drop(again);
    let other = Log::open(
        &path,
        tp,
        Some([8u8; 16]),
        LogConfig::default(),
        LoadParams::default(),
        NOW,
    );
    assert_eq!(other.err().unwrap().kafka_error_code(), 103);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn offsets_stay_contiguous_across_rolls_and_every_offset_is_readable(
        counts in proptest::collection::vec(1usize..8, 1..40),
        segment_bytes in 300i32..1200,
        index_interval in 1i32..300,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes, index_interval_bytes: index_interval, ..LogConfig::default() };
        let mut log = open_log(dir.path(), config);
        let mut expected = 0;
        for (i, count) in counts.iter().enumerate() {
            let info = log.append_as_leader(&TestBatch::simple(*count, NOW + i as i64).encode(), 0, NOW).unwrap();
            prop_assert_eq!(info.first_offset, expected);
            expected = info.last_offset + 1;
        }
        prop_assert_eq!(log.log_end_offset(), expected);
        let bases = log.segment_base_offsets();
        for offset in 0..expected {
            let fetched = log.read(offset, 1, i64::MAX, true).unwrap();
            let batches = batches_of(&fetched.records.read_bytes().unwrap());
            prop_assert_eq!(batches.len(), 1);
            let header = batches[0].0;
            prop_assert!(header.base_offset <= offset && offset <= header.last_offset());
            // A batch never straddles segments: it starts in the segment holding its base.
            let segment = bases.iter().rev().find(|b| **b <= offset).unwrap();
            prop_assert!(header.base_offset >= *segment);
        }
        let everything = log.read(0, usize::MAX, i64::MAX, false).unwrap();
        prop_assert!(everything.next_offset <= expected);
    }
}
