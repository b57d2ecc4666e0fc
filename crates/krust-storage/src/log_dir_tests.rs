//! A log dir as a whole: its lock and its checkpoint files.

use std::fs;

use crate::batch::test_batches::TestBatch;
use crate::checkpoint::{HIGH_WATERMARK_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::log_manager::LogManager;
use crate::log_tests::NOW;
use crate::recovery::RecoveryStats;
use crate::segment::offset_file_path;
use crate::topic_partition::TopicPartition;

fn append_some(manager: &LogManager, tp: &TopicPartition) {
    let log = manager
        .get_or_create(tp, None, LogConfig::default())
        .unwrap();
    log.lock()
        .append_as_leader(&TestBatch::simple(3, NOW).encode(), 0, NOW)
        .unwrap();
}

#[test]
fn a_checkpoint_of_binary_garbage_is_recovered_from_like_text_garbage() {
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().to_path_buf()];
    let tp = TopicPartition::new("t", 0);
    let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
    append_some(&manager, &tp);
    manager.shutdown().unwrap();
    drop(manager);
    let checkpoint = root.path().join(RECOVERY_POINT_CHECKPOINT_FILE);
    for garbage in [&b"garbage\n"[..], &[0xff, 0xfe, 0x00, 0xc3, 0x28, 0x0a][..]] {
        fs::write(&checkpoint, garbage).unwrap();
        let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
        assert_eq!(manager.get(&tp).unwrap().lock().log_end_offset(), 3);
        manager.shutdown().unwrap();
    }
}

#[test]
fn a_second_manager_on_a_locked_log_dir_is_refused_until_the_first_shuts_down() {
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().join("a"), root.path().join("b")];
    let first = LogManager::open(&dirs, LogConfig::default()).unwrap();
    let tp = TopicPartition::new("t", 0);
    append_some(&first, &tp);
    // Only the second dir in common is enough to be refused.
    let overlapping = vec![root.path().join("c"), dirs[1].clone()];
    match LogManager::open(&overlapping, LogConfig::default()) {
        Err(error @ StorageError::LogDirLocked { .. }) => {
            assert!(error.to_string().contains(&dirs[1].display().to_string()));
        }
        other => panic!("expected LogDirLocked, got {:?}", other.err()),
    }
    // The refused manager changed nothing: the first one still serves its log.
    append_some(&first, &tp);
    assert_eq!(first.get(&tp).unwrap().lock().log_end_offset(), 6);
    first.shutdown().unwrap();
    let second = LogManager::open(&dirs, LogConfig::default()).unwrap();
    assert_eq!(second.get(&tp).unwrap().lock().log_end_offset(), 6);
    drop(second);
    drop(first);
    LogManager::open(&dirs, LogConfig::default()).unwrap();
}

#[test]
fn a_roll_flushes_the_rolled_segments_so_an_unclean_restart_recovers_only_the_active_one() {
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().to_path_buf()];
    let config = LogConfig {
        segment_bytes: 1000,
        ..LogConfig::default()
    };
    let tp = TopicPartition::new("t", 0);
    let manager = LogManager::open(&dirs, config.clone()).unwrap();
    let log = manager.get_or_create(&tp, None, config.clone()).unwrap();
    for _ in 0..30 {
        log.lock()
            .append_as_leader(&TestBatch::simple(3, NOW).encode(), 0, NOW)
            .unwrap();
    }
    manager.scheduler.drain();
    let bases = log.lock().segment_base_offsets();
    let active_base = *bases.last().unwrap();
    assert!(bases.len() >= 3, "{bases:?}");
    assert_eq!(log.lock().recovery_point(), active_base);
    manager.checkpoint().unwrap();
    let active_bytes = fs::metadata(offset_file_path(
        &root.path().join("t-0"),
        active_base,
        ".log",
    ))
    .unwrap()
    .len();
    // A kill -9: no shutdown, no clean-shutdown marker.
    drop(log);
    drop(manager);

    let reopened = LogManager::open(&dirs, config).unwrap();
    let log = reopened.get(&tp).unwrap();
    let log = log.lock();
    assert_eq!(log.log_end_offset(), 90);
    assert_eq!(
        log.recovered_at_open(),
        RecoveryStats {
            segments: 1,
            bytes: active_bytes
        }
    );
}

/// A manager over one log dir holding partition `t-0` with 3 records, 2 of them committed.
fn three_records_two_committed(root: &std::path::Path) -> (LogManager, TopicPartition) {
    let manager = LogManager::open(&[root.to_path_buf()], LogConfig::default()).unwrap();
    let tp = TopicPartition::new("t", 0);
    append_some(&manager, &tp);
    manager
        .get(&tp)
        .unwrap()
        .lock()
        .maybe_increment_high_watermark(2);
    (manager, tp)
}

fn reopened_offsets(root: &std::path::Path, tp: &TopicPartition) -> (i64, i64) {
    let manager = LogManager::open(&[root.to_path_buf()], LogConfig::default()).unwrap();
    let log = manager.get(tp).unwrap();
    let log = log.lock();
    (log.high_watermark(), log.log_end_offset())
}

#[test]
fn a_restarted_log_takes_its_high_watermark_from_kafkas_checkpoint_file() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = three_records_two_committed(root.path());
    manager.shutdown().unwrap();
    drop(manager);
    let file = root.path().join(HIGH_WATERMARK_CHECKPOINT_FILE);
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n1\nt 0 2\n");
    assert_eq!(reopened_offsets(root.path(), &tp), (2, 3));
}

#[test]
fn after_a_crash_the_high_watermark_is_the_last_periodic_checkpoints() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = three_records_two_committed(root.path());
    manager.checkpoint_high_watermarks().unwrap();
    manager
        .get(&tp)
        .unwrap()
        .lock()
        .maybe_increment_high_watermark(3);
    drop(manager);
    assert_eq!(reopened_offsets(root.path(), &tp), (2, 3));
}

#[test]
fn a_checkpointed_high_watermark_past_the_log_end_is_cut_to_the_log_end() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = three_records_two_committed(root.path());
    manager.shutdown().unwrap();
    drop(manager);
    fs::write(
        root.path().join(HIGH_WATERMARK_CHECKPOINT_FILE),
        "0\n1\nt 0 99\n",
    )
    .unwrap();
    assert_eq!(reopened_offsets(root.path(), &tp), (3, 3));
}

#[test]
fn a_missing_or_corrupt_high_watermark_checkpoint_starts_at_the_log_start_and_keeps_every_record() {
    let root = tempfile::tempdir().unwrap();
    let (manager, tp) = three_records_two_committed(root.path());
    manager.shutdown().unwrap();
    drop(manager);
    let file = root.path().join(HIGH_WATERMARK_CHECKPOINT_FILE);
    fs::remove_file(&file).unwrap();
    assert_eq!(reopened_offsets(root.path(), &tp), (0, 3));
    for garbage in [
        &b"0\n7\nt 0 2\n"[..],
        &[0xff, 0x00, 0x0a][..],
        &b"0\n1\nt zero 2\n"[..],
    ] {
        fs::write(&file, garbage).unwrap();
        assert_eq!(reopened_offsets(root.path(), &tp), (0, 3));
    }
}
