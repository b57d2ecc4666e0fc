//! Moving a replica between log dirs: the future log's copy, the swap and a restart.

use std::fs;
use std::path::{Path, PathBuf};

use crate::batch::test_batches::TestBatch;
use crate::config::LogConfig;
use crate::log::SharedLog;
use crate::log_dir_move::MoveProgress;
use crate::log_manager::LogManager;
use crate::log_tests::{read_all, NOW};
use crate::topic_partition::TopicPartition;
use crate::topic_partition::{DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// A manager over two log dirs with `tp` created in the first.
fn two_dirs(root: &Path, tp: &TopicPartition) -> (LogManager, Vec<PathBuf>) {
    let dirs = vec![root.join("d1"), root.join("d2")];
    let manager = LogManager::open(&dirs, small_segments()).unwrap();
    manager.maybe_update_preferred_log_dir(tp, &dirs[0]);
    manager
        .get_or_create(tp, Some([9; 16]), small_segments())
        .unwrap();
    (manager, dirs)
}

/// Appends a batch of 5 records as leader in `epoch`, with the high watermark at the end.
fn produce(log: &SharedLog, epoch: i32) {
    let mut log = log.lock();
    log.append_as_leader(&TestBatch::simple(5, NOW).encode(), epoch, NOW)
        .unwrap();
    let end = log.log_end_offset();
    log.maybe_increment_high_watermark(end);
}

/// Every offset of the log, in order, from its batches.
fn offsets(log: &SharedLog) -> Vec<i64> {
    read_all(&log.lock())
        .iter()
        .flat_map(|(header, _)| header.base_offset..=header.last_offset())
        .collect()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("t-0"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_log_moves_to_another_dir_while_records_are_appended_and_keeps_every_offset_once() {
    let root = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0);
    let (manager, dirs) = two_dirs(root.path(), &tp);
    let log = manager.get(&tp).unwrap();
    for _ in 0..40 {
        produce(&log, 0);
    }
    assert!(manager.maybe_create_future_log(&tp, &dirs[1]).unwrap());
    // Asking again for the same dir, or for the current one's, changes nothing.
    assert!(!manager.maybe_create_future_log(&tp, &dirs[1]).unwrap());
    let future_name = names_in(&dirs[1]).pop().unwrap();
    assert!(future_name.starts_with("t-0.") && future_name.ends_with(FUTURE_DIR_SUFFIX));
    let mut steps = 0;
    let promoted = loop {
        steps += 1;
        assert!(steps < 1000, "the move never finished");
        // Producers keep writing, in a new leader epoch half way.
        produce(&log, if steps < 3 { 0 } else { 1 });
        match manager.advance_future_log(&tp, 1500).unwrap() {
            MoveProgress::Promoted => break steps,
            MoveProgress::Copying { lag, .. } => assert!(lag > 0),
            MoveProgress::Idle => panic!("the move stopped"),
        }
    };
    assert!(promoted > 3, "copied in several steps, not one");
    // The same SharedLog now is the log in the second dir.
    assert_eq!(log.lock().dir(), dirs[1].join("t-0"));
    assert_eq!(manager.get(&tp).unwrap().lock().dir(), dirs[1].join("t-0"));
    assert!(manager.future_log(&tp).is_none());
    assert_eq!(names_in(&dirs[1]), vec!["t-0".to_string()]);
    let left = names_in(&dirs[0]);
    assert_eq!(left.len(), 1);
    assert!(left[0].starts_with("t-0.") && left[0].ends_with(DELETE_DIR_SUFFIX));
    let end = log.lock().log_end_offset();
    assert_eq!(end, 5 * (40 + promoted as i64));
    assert_eq!(offsets(&log), (0..end).collect::<Vec<i64>>());
    assert_eq!(log.lock().high_watermark(), end);
    assert_eq!(log.lock().latest_epoch(), Some(1));
    assert_eq!(log.lock().topic_id(), Some([9; 16]));
    // Appends after the swap land in the new dir.
    produce(&log, 1);
    assert_eq!(offsets(&log).len() as i64, end + 5);
    manager.shutdown().unwrap();
    drop(manager);
    // The next start removes the old directory and loads the moved log.
    let reopened = LogManager::open(&dirs, small_segments()).unwrap();
    assert!(names_in(&dirs[0]).is_empty());
    let log = reopened.get(&tp).unwrap();
    assert_eq!(log.lock().dir(), dirs[1].join("t-0"));
    assert_eq!(offsets(&log), (0..end + 5).collect::<Vec<i64>>());
}

#[test]
fn a_restart_resumes_the_copy_and_a_stop_between_the_renames_promotes_the_future_log() {
    let root = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0);
    let (manager, dirs) = two_dirs(root.path(), &tp);
    let log = manager.get(&tp).unwrap();
    for _ in 0..30 {
        produce(&log, 3);
    }
    assert!(manager.maybe_create_future_log(&tp, &dirs[1]).unwrap());
    let first = manager.advance_future_log(&tp, 1000).unwrap();
    assert!(matches!(first, MoveProgress::Copying { .. }), "{first:?}");
    // Killed mid-copy (no clean shutdown).
    drop(manager);
    let manager = LogManager::open(&dirs, small_segments()).unwrap();
    assert_eq!(manager.future_partitions(), vec![tp.clone()]);
    assert_eq!(manager.future_log_dir(&tp).unwrap(), dirs[1]);
    let copied = manager.future_log(&tp).unwrap().lock().log_end_offset();
    assert!(copied > 0 && copied < 150, "copied {copied}");
    // Copy to the end but stop before the swap: simulate a stop between the two renames.
    while manager.future_log(&tp).unwrap().lock().log_end_offset() < 150 {
        let future = manager.future_log(&tp).unwrap();
        let current = manager.get(&tp).unwrap();
        super::log_dir_move::tests_support::copy(&current, &future, 1000);
    }
    manager.shutdown().unwrap();
    drop(manager);
    let current_dir = dirs[0].join("t-0");
    fs::rename(
        &current_dir,
        dirs[0].join(format!("t-0.{}{DELETE_DIR_SUFFIX}", "0".repeat(32))),
    )
    .unwrap();
    let manager = LogManager::open(&dirs, small_segments()).unwrap();
    assert!(manager.future_partitions().is_empty());
    assert!(names_in(&dirs[0]).is_empty());
    let log = manager.get(&tp).unwrap();
    assert_eq!(log.lock().dir(), dirs[1].join("t-0"));
    assert_eq!(offsets(&log), (0..150).collect::<Vec<i64>>());
}

#[test]
fn a_future_log_follows_a_truncation_of_the_current_log_and_can_be_cancelled() {
    let root = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("t", 0);
    let (manager, dirs) = two_dirs(root.path(), &tp);
    let log = manager.get(&tp).unwrap();
    for _ in 0..4 {
        produce(&log, 0);
    }
    assert!(manager.maybe_create_future_log(&tp, &dirs[1]).unwrap());
    let future = manager.future_log(&tp).unwrap();
    super::log_dir_move::tests_support::copy(&log, &future, 1 << 20);
    assert_eq!(future.lock().log_end_offset(), 20);
    // The current log (a follower) truncates and takes other records in a later epoch.
    log.lock().truncate_to(10).unwrap();
    produce(&log, 2);
    super::log_dir_move::tests_support::copy(&log, &future, 1 << 20);
    assert_eq!(future.lock().log_end_offset(), 15);
    assert_eq!(future.lock().latest_epoch(), Some(2));
    assert_eq!(future.lock().end_offset_for_epoch(0), (0, 10));
    // Cancelled: the future directory goes, the current log stays.
    assert!(manager.remove_future_log(&tp).unwrap());
    assert!(names_in(&dirs[1]).is_empty());
    assert_eq!(log.lock().dir(), dirs[0].join("t-0"));
    assert_eq!(
        manager.advance_future_log(&tp, 100).unwrap(),
        MoveProgress::Idle
    );
}

#[test]
fn log_dirs_are_named_by_their_absolute_path_and_new_partitions_go_to_the_preferred_one() {
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().join("d1"), root.path().join("d2")];
    let manager = LogManager::open(&dirs, LogConfig::default()).unwrap();
    let found = manager.online_log_dir(dirs[1].to_str().unwrap()).unwrap();
    assert_eq!(found, dirs[1]);
    let missing = manager.online_log_dir("/nowhere").unwrap_err();
    assert_eq!(missing.kafka_error_code(), 57);
    manager
        .failure_channel()
        .maybe_add_offline_log_dir(&dirs[0], &"injected");
    let offline = manager
        .online_log_dir(dirs[0].to_str().unwrap())
        .unwrap_err();
    assert_eq!(offline.kafka_error_code(), 56);
    for partition in 0..3 {
        let tp = TopicPartition::new("p", partition);
        manager.maybe_update_preferred_log_dir(&tp, &dirs[1]);
        let log = manager
            .get_or_create(&tp, None, LogConfig::default())
            .unwrap();
        assert_eq!(log.lock().dir().parent().unwrap(), dirs[1]);
    }
}
