//! Transactions in a partition log (KIP-98): the last stable offset, the `.txnindex`, the
//! marker checks, and how they survive restarts, recovery, truncation and followers.

use std::path::Path;

use crate::append_origin::AppendOrigin;
use crate::batch::test_batches::TestBatch;
use crate::config::LogConfig;
use crate::control_batch::{end_txn_marker, transactional_coordinator_batch};
use crate::log::{LoadParams, Log, LogAppendInfo};
use crate::log_tests::{open_log, open_log_with, NOW};
use crate::txn_index::AbortedTxn;

fn txn_batch(pid: i64, epoch: i16, seq: i32, count: usize) -> Vec<u8> {
    TestBatch::simple(count, NOW)
        .transactional(pid, epoch, seq)
        .encode()
}

fn produce(log: &mut Log, batch: &[u8]) -> LogAppendInfo {
    log.append_as_leader(batch, 0, NOW).unwrap()
}

fn marker(log: &mut Log, pid: i64, epoch: i16, coordinator_epoch: i32, commit: bool) -> i64 {
    let batch = end_txn_marker(pid, epoch, coordinator_epoch, commit, NOW);
    log.append_as_leader_from(AppendOrigin::Coordinator, &batch, 0, NOW)
        .unwrap()
        .first_offset
}

fn replicate_all(log: &mut Log) {
    log.maybe_increment_high_watermark(log.log_end_offset());
}

fn aborted(pid: i64, first_offset: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset,
    }
}

fn txn_index_file(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join("t-0").join(format!("{base:020}.txnindex"))
}

#[test]
fn the_last_stable_offset_waits_for_the_marker_and_its_replication() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    produce(&mut log, &txn_batch(1, 0, 0, 3));
    produce(&mut log, &TestBatch::simple(2, NOW).encode());
    replicate_all(&mut log);
    assert_eq!((log.high_watermark(), log.last_stable_offset()), (5, 0));
    let at = marker(&mut log, 1, 0, 0, true);
    assert_eq!(at, 5);
    log.maybe_increment_high_watermark(5);
    assert_eq!(
        log.last_stable_offset(),
        0,
        "the marker is not replicated yet"
    );
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 6);
    assert!(log.collect_aborted_transactions(0, 6).is_empty());
}

#[test]
fn an_abort_is_indexed_in_kafkas_format_and_listed_for_fetches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    produce(&mut log, &txn_batch(1, 0, 0, 2)); // 0..1
    produce(&mut log, &txn_batch(2, 0, 0, 2)); // 2..3
    let abort_at = marker(&mut log, 1, 0, 5, false); // 4
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 2, "producer 2 is still open");
    let bytes = std::fs::read(txn_index_file(dir.path(), 0)).unwrap();
    let mut expected = 0i16.to_be_bytes().to_vec();
    for field in [1i64, 0, abort_at, 2] {
        expected.extend_from_slice(&field.to_be_bytes());
    }
    assert_eq!(bytes, expected);
    assert_eq!(log.collect_aborted_transactions(0, 5), vec![aborted(1, 0)]);
    assert!(log.collect_aborted_transactions(5, 9).is_empty());
    marker(&mut log, 2, 0, 5, false);
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 6);
    assert_eq!(
        log.collect_aborted_transactions(3, 6),
        vec![aborted(1, 0), aborted(2, 2)]
    );
    let info = log.producer_state().producers()[&2].clone();
    assert_eq!(
        (info.current_txn_first_offset, info.coordinator_epoch),
        (-1, 5)
    );
}

#[test]
fn markers_are_checked_as_kafka_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    produce(&mut log, &txn_batch(1, 3, 0, 1));
    let code = |log: &mut Log, batch: &[u8], origin| {
        log.append_as_leader_from(origin, batch, 0, NOW)
            .unwrap_err()
            .kafka_error_code()
    };
    let plain = TestBatch::simple(1, NOW).idempotent(1, 3, 1).encode();
    assert_eq!(code(&mut log, &plain, AppendOrigin::Client), 48);
    let old_epoch = end_txn_marker(1, 2, 0, true, NOW);
    assert_eq!(code(&mut log, &old_epoch, AppendOrigin::Coordinator), 47);
    marker(&mut log, 1, 3, 7, false);
    produce(&mut log, &txn_batch(1, 3, 1, 1));
    let zombie = end_txn_marker(1, 3, 6, true, NOW);
    assert_eq!(code(&mut log, &zombie, AppendOrigin::Coordinator), 52);
    let mut garbled = end_txn_marker(1, 3, 7, true, NOW);
    // The key's type field: 1 (COMMIT) becomes 9, not a transaction marker.
    let key_type = garbled.len() - 9;
    assert_eq!(garbled[key_type], 1);
    garbled[key_type] = 9;
    let crc = crate::batch::compute_crc(&garbled);
    garbled[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(code(&mut log, &garbled, AppendOrigin::Coordinator), 87);
    assert_eq!(log.log_end_offset(), 3, "nothing refused was written");
    assert_eq!(log.producer_state().first_unstable_offset(), Some(0));
    replicate_all(&mut log);
    assert_eq!(log.producer_state().first_unstable_offset(), Some(2));
}

#[test]
fn coordinator_batches_without_sequence_start_a_transaction_and_are_never_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    let batch = transactional_coordinator_batch(9, 1, &[(Some(b"k"), Some(b"v"))], NOW);
    let first = log
        .append_as_leader_from(AppendOrigin::Coordinator, &batch, 0, NOW)
        .unwrap();
    let second = log
        .append_as_leader_from(AppendOrigin::Coordinator, &batch, 0, NOW)
        .unwrap();
    assert_eq!((first.first_offset, second.first_offset), (0, 1));
    assert!(!second.duplicate);
    assert_eq!(
        log.append_as_leader(&batch, 0, NOW)
            .unwrap_err()
            .kafka_error_code(),
        87
    );
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 0);
    marker(&mut log, 9, 1, 0, true);
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 3);
}

#[test]
fn an_open_transaction_survives_a_clean_restart_through_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), LogConfig::default());
    produce(&mut log, &TestBatch::simple(2, NOW).encode());
    produce(&mut log, &txn_batch(4, 0, 0, 2));
    log.close().unwrap();
    let params = LoadParams {
        had_clean_shutdown: true,
        high_watermark: 4,
        ..LoadParams::default()
    };
    let mut log = open_log_with(dir.path(), LogConfig::default(), params);
    assert_eq!(log.last_stable_offset(), 2);
    assert_eq!(
        log.producer_state().producers()[&4].current_txn_first_offset,
        2
    );
    marker(&mut log, 4, 0, 0, false);
    replicate_all(&mut log);
    assert_eq!(log.last_stable_offset(), 5);
    assert_eq!(log.collect_aborted_transactions(0, 5), vec![aborted(4, 2)]);
}

fn abort_in_second_segment(dir: &Path) -> Log {
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let mut log = open_log(dir, config);
    produce(&mut log, &txn_batch(1, 0, 0, 3));
    log.roll(NOW).unwrap();
    produce(&mut log, &TestBatch::simple(1, NOW).encode());
    marker(&mut log, 1, 0, 0, false);
    replicate_all(&mut log);
    log.flush().unwrap();
    log
}

#[test]
fn recovery_rebuilds_a_lost_or_garbled_transaction_index() {
    let dir = tempfile::tempdir().unwrap();
    let log = abort_in_second_segment(dir.path());
    assert_eq!(log.segment_base_offsets(), vec![0, 3]);
    assert_eq!(log.collect_aborted_transactions(0, 5), vec![aborted(1, 0)]);
    let original = std::fs::read(txn_index_file(dir.path(), 3)).unwrap();
    drop(log);
    let reopen = |params: LoadParams| {
        let config = LogConfig {
            segment_bytes: 400,
            ..LogConfig::default()
        };
        let log = open_log_with(dir.path(), config, params);
        assert_eq!(log.collect_aborted_transactions(0, 5), vec![aborted(1, 0)]);
        assert_eq!(log.last_stable_offset(), 5);
    };
    std::fs::remove_file(txn_index_file(dir.path(), 3)).unwrap();
    let unclean = LoadParams {
        recovery_point: 3,
        high_watermark: 5,
        ..LoadParams::default()
    };
    reopen(unclean);
    assert_eq!(
        std::fs::read(txn_index_file(dir.path(), 3)).unwrap(),
        original
    );
    std::fs::write(txn_index_file(dir.path(), 3), b"not an index").unwrap();
    let clean = LoadParams {
        had_clean_shutdown: true,
        high_watermark: 5,
        ..LoadParams::default()
    };
    reopen(clean);
    assert_eq!(
        std::fs::read(txn_index_file(dir.path(), 3)).unwrap(),
        original
    );
}

#[test]
fn truncation_and_retention_take_the_index_entries_with_their_markers() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = abort_in_second_segment(dir.path());
    log.truncate_to(4).unwrap();
    assert!(log.collect_aborted_transactions(0, 5).is_empty());
    assert_eq!(
        std::fs::metadata(txn_index_file(dir.path(), 3))
            .unwrap()
            .len(),
        0
    );
    assert_eq!(log.producer_state().first_unstable_offset(), Some(0));
    assert_eq!(log.last_stable_offset(), 0, "the transaction is open again");

    let dir = tempfile::tempdir().unwrap();
    let mut log = abort_in_second_segment(dir.path());
    log.roll(NOW).unwrap();
    log.delete_records(crate::retention::HIGH_WATERMARK)
        .unwrap();
    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    let deleted_index = txn_index_file(dir.path(), 3).with_extension("txnindex.deleted");
    assert!(
        deletion.files.contains(&deleted_index),
        "{:?}",
        deletion.files
    );
    assert!(deleted_index.exists() && !txn_index_file(dir.path(), 3).exists());
}

#[test]
fn a_follower_applies_transactions_and_markers_from_its_leader() {
    let leader_dir = tempfile::tempdir().unwrap();
    let leader = abort_in_second_segment(leader_dir.path());
    let follower_dir = tempfile::tempdir().unwrap();
    let mut follower = open_log(follower_dir.path(), LogConfig::default());
    let fetched = leader.read(0, usize::MAX, i64::MAX, true).unwrap();
    follower
        .append_as_follower(&fetched.records.read_bytes().unwrap(), NOW)
        .unwrap();
    let rest = leader.read(3, usize::MAX, i64::MAX, true).unwrap();
    follower.maybe_increment_high_watermark(3);
    assert_eq!(follower.last_stable_offset(), 0);
    follower
        .append_as_follower(&rest.records.read_bytes().unwrap(), NOW)
        .unwrap();
    follower.maybe_increment_high_watermark(5);
    assert_eq!(follower.last_stable_offset(), 5);
    assert_eq!(
        follower.collect_aborted_transactions(0, 5),
        vec![aborted(1, 0)]
    );
    follower.truncate_fully_and_start_at(5).unwrap();
    assert!(follower.collect_aborted_transactions(5, 6).is_empty());
    assert_eq!(follower.producer_state().first_unstable_offset(), None);
}

/// A data record: offset, key, value.
type Stored = (i64, Vec<u8>, Vec<u8>);

/// Every data record, and the offsets of the control batches.
fn records_and_markers(log: &Log) -> (Vec<Stored>, Vec<i64>) {
    let fetched = log.read(0, usize::MAX, i64::MAX, true).unwrap();
    let bytes = fetched.records.read_bytes().unwrap();
    let (mut records, mut markers) = (Vec::new(), Vec::new());
    for range in crate::batch::split_batches(&bytes).unwrap() {
        let header = crate::batch::check_integrity(&bytes[range.clone()]).unwrap();
        if header.is_control() {
            markers.push(header.base_offset);
            continue;
        }
        let area = crate::batch_builder::records_area(&bytes[range], &header, 1 << 20).unwrap();
        for record in crate::records::record_views(&area) {
            let record = record.unwrap();
            records.push((
                header.base_offset + i64::from(record.offset_delta),
                record.key.unwrap().to_vec(),
                record.value.unwrap().to_vec(),
            ));
        }
    }
    (records, markers)
}

#[test]
fn the_cleaner_discards_aborted_records_and_keeps_markers_with_their_index_entries() {
    use crate::cleaner::clean::{clean_log, LogToClean, Throttler};
    use crate::cleaner::offset_map::OffsetMap;

    let dir = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.apply_override("cleanup.policy", "compact").unwrap();
    let mut log = open_log(dir.path(), config);
    let keyed = |pid: i64, key: &str, value: &str| {
        let mut batch = TestBatch::simple(1, NOW).transactional(pid, 0, 0);
        batch.records[0].key = Some(key.as_bytes().to_vec());
        batch.records[0].value = Some(value.as_bytes().to_vec());
        batch.encode()
    };
    produce(&mut log, &keyed(1, "a", "committed")); // 0
    marker(&mut log, 1, 0, 0, true); // 1
    log.roll(NOW).unwrap();
    produce(&mut log, &keyed(2, "a", "aborted")); // 2
    marker(&mut log, 2, 0, 0, false); // 3
    log.roll(NOW).unwrap();
    replicate_all(&mut log);
    assert_eq!(log.collect_aborted_transactions(0, 4), vec![aborted(2, 2)]);

    let log = std::sync::Arc::new(parking_lot::Mutex::new(log));
    let to_clean = LogToClean::take(&log.lock(), None, NOW);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut throttler = Throttler::new(f64::MAX, &stop);
    let mut map = OffsetMap::new(1 << 20);
    clean_log(&log, &to_clean, &mut map, &mut throttler, NOW).unwrap();

    let log = log.lock();
    let (records, markers) = records_and_markers(&log);
    let committed = (0, b"a".to_vec(), b"committed".to_vec());
    assert_eq!(
        records,
        vec![committed],
        "the aborted value displaced nothing"
    );
    assert_eq!(markers, vec![1, 3]);
    assert_eq!(log.collect_aborted_transactions(0, 4), vec![aborted(2, 2)]);
}

#[test]
fn a_replicated_control_batch_that_is_no_marker_is_stored_without_ending_anything() {
    let dir = tempfile::tempdir().unwrap();
    let mut follower = open_log(dir.path(), LogConfig::default());
    follower
        .append_as_follower(&txn_batch(1, 0, 0, 1), NOW)
        .unwrap();
    // A control batch of the producer whose record is a plain key/value, not a marker.
    let mut forged = TestBatch::simple(1, NOW).transactional(1, 0, -1);
    forged.attributes |= 0x20;
    let mut bytes = forged.encode();
    bytes[..8].copy_from_slice(&1i64.to_be_bytes());
    follower.append_as_follower(&bytes, NOW).unwrap();
    follower.maybe_increment_high_watermark(2);
    assert_eq!(follower.log_end_offset(), 2);
    assert_eq!(
        follower.last_stable_offset(),
        0,
        "the transaction is still open"
    );
    assert!(follower.collect_aborted_transactions(0, 2).is_empty());
}
