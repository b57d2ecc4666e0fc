//! Retention, the log start offset and DeleteRecords on real logs and log dirs.

use std::fs;
use std::path::{Path, PathBuf};

use crate::batch::test_batches::TestBatch;
use crate::checkpoint::LOG_START_OFFSET_CHECKPOINT_FILE;
use crate::config::LogConfig;
use crate::error::ReadError;
use crate::log::Log;
use crate::log_manager::LogManager;
use crate::log_tests::{open_log, read_all, NOW};
use crate::retention::{DeleteRecordsError, DeletionReason, HIGH_WATERMARK};
use crate::topic_partition::TopicPartition;

const HOUR: i64 = 3_600_000;

/// Segments of two 2-record batches each.
fn small_segments() -> LogConfig {
    let batch = TestBatch::simple(2, NOW).encode().len();
    LogConfig {
        segment_bytes: (batch * 2) as i32,
        ..LogConfig::default()
    }
}

/// Small segments whose records expire after an hour.
fn hour_retention() -> LogConfig {
    LogConfig {
        retention_ms: HOUR,
        ..small_segments()
    }
}

/// Two hours before NOW: past `hour_retention`.
const OLD: i64 = NOW - 2 * HOUR;

/// Appends one 2-record batch per timestamp and makes it all readable to consumers.
fn append_at(log: &mut Log, timestamps: &[i64]) {
    for &timestamp in timestamps {
        log.append_as_leader(&TestBatch::simple(2, timestamp).encode(), 0, NOW)
            .unwrap();
    }
    log.maybe_increment_high_watermark(log.log_end_offset());
}

fn files_named(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

#[test]
fn time_retention_deletes_whole_old_segments_and_renames_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), hour_retention());
    append_at(&mut log, &[OLD, OLD, OLD, OLD, NOW, NOW]);
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8]);

    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    let reasons: Vec<_> = deletion.segments.iter().map(|s| s.reason).collect();
    assert_eq!(reasons, vec![DeletionReason::RetentionMs; 2]);
    assert_eq!(log.segment_base_offsets(), vec![8]);
    assert_eq!((log.log_start_offset(), deletion.log_start_offset), (8, 8));
    let partition_dir = dir.path().join("t-0");
    assert_eq!(
        files_named(&partition_dir, ".log.deleted"),
        vec![
            "00000000000000000000.log.deleted",
            "00000000000000000004.log.deleted"
        ]
    );
    // The snapshot written when segment 4 rolled is below the new start: it goes too.
    assert!(partition_dir
        .join("00000000000000000004.snapshot.deleted")
        .exists());
    assert!(partition_dir.join("00000000000000000008.snapshot").exists());
    assert!(deletion.files.iter().all(|f| f.exists()));
    assert!(matches!(
        log.read(0, usize::MAX, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    let offsets: Vec<i64> = read_all(&log).iter().map(|(h, _)| h.base_offset).collect();
    assert_eq!(offsets, vec![8, 10]);
    assert!(log.delete_old_segments(NOW).unwrap().is_none());
}

#[test]
fn an_entirely_expired_log_rolls_and_keeps_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), hour_retention());
    append_at(&mut log, &[OLD, OLD, OLD]);
    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    assert_eq!(deletion.segments.len(), 2);
    assert_eq!(log.segment_base_offsets(), vec![6]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (6, 6));
    let info = log
        .append_as_leader(&TestBatch::simple(1, NOW).encode(), 0, NOW)
        .unwrap();
    assert_eq!(info.first_offset, 6);
    // An empty active segment is never deleted (it would only be re-created).
    log.maybe_increment_high_watermark(7);
    assert!(log.delete_old_segments(NOW).unwrap().is_none());
}

#[test]
fn nothing_at_or_above_the_high_watermark_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), hour_retention());
    for _ in 0..4 {
        log.append_as_leader(&TestBatch::simple(2, OLD).encode(), 0, NOW)
            .unwrap();
    }
    log.maybe_increment_high_watermark(3);
    assert!(log.delete_old_segments(NOW).unwrap().is_none());
    log.maybe_increment_high_watermark(4);
    assert_eq!(
        log.delete_old_segments(NOW)
            .unwrap()
            .unwrap()
            .segments
            .len(),
        1
    );
    assert_eq!(log.log_start_offset(), 4);
}

#[test]
fn size_retention_keeps_the_newest_segments_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let segment_bytes = small_segments().segment_bytes;
    let config = LogConfig {
        retention_bytes: i64::from(segment_bytes) * 2,
        ..small_segments()
    };
    let mut log = open_log(dir.path(), config);
    append_at(&mut log, &[NOW; 9]);
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8, 12, 16]);
    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    assert_eq!(deletion.bytes(), 2 * segment_bytes as u64);
    assert!(deletion
        .segments
        .iter()
        .all(|s| s.reason == DeletionReason::RetentionBytes));
    // The newest segments stay as long as they fill the budget: without segment 8 the log
    // would fall below it.
    assert_eq!(log.segment_base_offsets(), vec![8, 12, 16]);
    let budget = 2 * segment_bytes as u64;
    assert!(log.size_in_bytes() >= budget);
    assert!(log.size_in_bytes() - (segment_bytes as u64) < budget);
}

#[test]
fn a_read_planned_before_a_deletion_completes_after_the_files_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), hour_retention());
    append_at(&mut log, &[OLD, OLD, NOW]);
    let in_flight = log.read_plan(0, log.high_watermark()).unwrap();
    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    for file in &deletion.files {
        fs::remove_file(file).unwrap();
    }
    let fetched = in_flight.read(usize::MAX, true).unwrap();
    assert_eq!(fetched.first_batch_offset, Some(0));
    assert_eq!(fetched.next_offset, 4);
    assert_eq!(fetched.records.read_bytes().unwrap().len(), {
        deletion.bytes() as usize
    });
}

#[test]
fn delete_records_moves_the_log_start_offset_up_to_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    append_at(&mut log, &[NOW; 5]);
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    assert_eq!(log.high_watermark(), 10);

    assert_eq!(log.recovery_point(), 0);
    assert_eq!(log.delete_records(5).unwrap(), 5);
    // As in Kafka, nothing below the log start offset needs recovery.
    assert_eq!(log.recovery_point(), 5);
    // Lowering is a no-op that still answers the low watermark.
    assert_eq!(log.delete_records(3).unwrap(), 5);
    assert!(matches!(
        log.read(4, usize::MAX, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // A fetch at the new start returns its whole batch (4-5); the client skips offset 4.
    let fetched = log.read(5, usize::MAX, i64::MAX, true).unwrap();
    assert_eq!(fetched.first_batch_offset, Some(4));
    assert!(matches!(
        log.delete_records(11),
        Err(DeleteRecordsError::OffsetOutOfRange {
            offset: 11,
            high_watermark: 10
        })
    ));
    assert!(matches!(
        log.delete_records(-2),
        Err(DeleteRecordsError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.delete_records(HIGH_WATERMARK).unwrap(), 10);

    // Segments wholly below the start go in the next pass, even without time or size limits.
    let deletion = log.delete_old_segments(NOW).unwrap().unwrap();
    assert!(deletion
        .segments
        .iter()
        .all(|s| s.reason == DeletionReason::LogStartOffset));
    assert_eq!(log.segment_base_offsets(), vec![8]);
    assert_eq!(log.log_start_offset(), 10);

    let mut compact = small_segments();
    compact.cleanup_policy.delete = false;
    compact.cleanup_policy.compact = true;
    log.update_config(compact).unwrap();
    assert!(matches!(
        log.delete_records(HIGH_WATERMARK),
        Err(DeleteRecordsError::PolicyViolation)
    ));
}

fn manager(root: &Path, delete_delay_ms: i64) -> (LogManager, TopicPartition) {
    let config = LogConfig {
        file_delete_delay_ms: delete_delay_ms,
        ..hour_retention()
    };
    let manager = LogManager::open(&[root.to_path_buf()], config.clone()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None, config).unwrap();
    append_at(&mut log.lock(), &[OLD, OLD, OLD, OLD, NOW]);
    (manager, tp)
}

fn deleted_files(root: &Path) -> Vec<PathBuf> {
    files_named(&root.join("t-0"), ".deleted")
        .into_iter()
        .map(PathBuf::from)
        .collect()
}

#[test]
fn a_retention_pass_checkpoints_the_log_start_offset_and_removes_files_after_the_delay() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = manager(root.path(), 0);
    let deleted = manager.cleanup_logs(NOW).unwrap();
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].0, tp);
    assert_eq!(deleted[0].1.log_start_offset, 8);
    let checkpoint = fs::read_to_string(root.path().join(LOG_START_OFFSET_CHECKPOINT_FILE));
    assert_eq!(checkpoint.unwrap(), "0\n1\nt 0 8\n");
    manager.scheduler.drain();
    assert_eq!(deleted_files(root.path()), Vec::<PathBuf>::new());
    assert!(manager.cleanup_logs(NOW).unwrap().is_empty());
}

#[test]
fn deleted_files_wait_for_the_delay_and_a_restart_removes_leftovers_and_keeps_the_start() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = manager(root.path(), HOUR);
    manager.cleanup_logs(NOW).unwrap();
    manager.get(&tp).unwrap().lock().delete_records(9).unwrap();
    manager.scheduler.drain();
    // Two segments' .log, .index and .timeindex, and the snapshot taken when segment 4 rolled.
    assert_eq!(deleted_files(root.path()).len(), 7);
    // Killed before the delay passed: no clean shutdown, only the retention pass's checkpoint.
    manager.checkpoint().unwrap();
    drop(manager);
    let reopened = LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
    assert_eq!(deleted_files(root.path()), Vec::<PathBuf>::new());
    let log = reopened.get(&tp).unwrap();
    assert_eq!(log.lock().log_start_offset(), 9);
    assert_eq!(log.lock().segment_base_offsets(), vec![8]);
}
