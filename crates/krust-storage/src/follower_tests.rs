//! A follower's appends and truncations, as the replica fetcher drives them.

use std::path::Path;

use crate::batch::test_batches::TestBatch;
use crate::batch::{self, BatchHeader};
use crate::config::LogConfig;
use crate::error::AppendError;
use crate::leader_epoch::EpochEntry;
use crate::log::{LoadParams, Log};
use crate::log_tests::{open_log, read_all, NOW};
use crate::topic_partition::TopicPartition;

/// Every byte of `log`, as a Fetch from a follower would read it.
fn fetch_all(log: &Log) -> Vec<u8> {
    read_all(log).into_iter().flat_map(|(_, b)| b).collect()
}

fn open_named(dir: &Path, name: &str, config: LogConfig) -> Log {
    Log::open(
        &dir.join(name),
        TopicPartition::new("t", 0),
        None,
        config,
        LoadParams::default(),
        NOW,
    )
    .unwrap()
}

/// A leader with batches of 2, 3 and 1 records under epochs 0, 0 and 3 (the last one
/// idempotent), offsets 0..6.
fn leader(dir: &Path, config: LogConfig) -> Log {
    let mut log = open_named(dir, "leader", config);
    log.append_as_leader(&TestBatch::simple(2, NOW).encode(), 0, NOW)
        .unwrap();
    log.append_as_leader(&TestBatch::simple(3, NOW + 10).encode(), 0, NOW)
        .unwrap();
    log.append_as_leader(
        &TestBatch::simple(1, NOW + 20).idempotent(7, 0, 0).encode(),
        3,
        NOW,
    )
    .unwrap();
    log
}

fn epochs(log: &Log) -> Vec<(i32, i64)> {
    log.leader_epoch_cache()
        .entries()
        .iter()
        .map(
            |EpochEntry {
                 epoch,
                 start_offset,
             }| (*epoch, *start_offset),
        )
        .collect()
}

fn headers(log: &Log) -> Vec<BatchHeader> {
    read_all(log).into_iter().map(|(h, _)| h).collect()
}

#[test]
fn a_follower_stores_the_leaders_batches_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let leader = leader(dir.path(), LogConfig::default());
    let mut follower = open_log(dir.path(), LogConfig::default());
    let info = follower
        .append_as_follower(&fetch_all(&leader), NOW + 99)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 5));
    assert_eq!(info.record_count, 6);
    assert_eq!(fetch_all(&follower), fetch_all(&leader));
    assert_eq!(follower.log_end_offset(), 6);
    assert_eq!(epochs(&follower), vec![(0, 0), (3, 5)]);
    let producer = &follower.producer_state().producers()[&7];
    assert_eq!(
        (producer.last_seq(), producer.batches[0].first_offset),
        (0, 5)
    );
    // A follower's high watermark comes from its leader, not its own appends.
    assert_eq!(follower.high_watermark(), 0);
}

#[test]
fn fetched_batches_append_in_pieces_and_roll_like_the_leaders_log() {
    let dir = tempfile::tempdir().unwrap();
    let largest_batch = TestBatch::simple(3, NOW).encode().len() as i32;
    let config = LogConfig {
        segment_bytes: largest_batch + 10,
        ..LogConfig::default()
    };
    let leader = leader(dir.path(), config.clone());
    let mut follower = open_log(dir.path(), config);
    let bytes = fetch_all(&leader);
    let ranges = batch::split_batches(&bytes).unwrap();
    follower
        .append_as_follower(&bytes[ranges[0].clone()], NOW)
        .unwrap();
    follower
        .append_as_follower(&bytes[ranges[1].start..], NOW)
        .unwrap();
    assert_eq!(follower.segment_base_offsets(), vec![0, 2, 5]);
    assert_eq!(fetch_all(&follower), bytes);
    assert!(follower.append_as_follower(&[], NOW).is_ok());
    assert_eq!(follower.log_end_offset(), 6);
}

#[test]
fn a_follower_refuses_overlapping_corrupt_or_unordered_batches_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let leader = leader(dir.path(), LogConfig::default());
    let bytes = fetch_all(&leader);
    let mut follower = open_log(dir.path(), LogConfig::default());
    follower.append_as_follower(&bytes, NOW).unwrap();

    let overlapping = follower.append_as_follower(&bytes, NOW).unwrap_err();
    assert!(matches!(
        overlapping,
        AppendError::UnexpectedAppendOffset {
            first_offset: 0,
            log_end_offset: 6
        }
    ));

    let mut later = TestBatch::simple(2, NOW).encode();
    batch::set_base_offset(&mut later, 6);
    let mut corrupt = later.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        follower
            .append_as_follower(&corrupt, NOW)
            .unwrap_err()
            .kafka_error_code(),
        2
    );

    let mut backwards = TestBatch::simple(1, NOW).encode();
    batch::set_base_offset(&mut backwards, 7);
    let unordered = [later.clone(), backwards].concat();
    assert_eq!(
        follower
            .append_as_follower(&unordered, NOW)
            .unwrap_err()
            .kafka_error_code(),
        87
    );
    assert_eq!(fetch_all(&follower), bytes);

    // A gap the leader's compaction left is kept.
    batch::set_base_offset(&mut later, 10);
    follower.append_as_follower(&later, NOW).unwrap();
    assert_eq!(follower.log_end_offset(), 12);
}

#[test]
fn truncation_removes_segments_epochs_and_producer_state_past_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let largest_batch = TestBatch::simple(3, NOW).encode().len() as i32;
    let config = LogConfig {
        segment_bytes: largest_batch + 10,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let leader = leader(dir.path(), config.clone());
    let mut follower = open_log(dir.path(), config.clone());
    follower
        .append_as_follower(&fetch_all(&leader), NOW)
        .unwrap();
    follower.maybe_increment_high_watermark(6);

    assert!(follower.truncate_to(5).unwrap());
    assert_eq!(follower.log_end_offset(), 5);
    assert_eq!(follower.segment_base_offsets(), vec![0, 2, 5]);
    assert_eq!(epochs(&follower), vec![(0, 0)]);
    assert!(follower.producer_state().producers().get(&7).is_none());
    assert_eq!(
        (follower.high_watermark(), follower.recovery_point()),
        (5, 0)
    );
    let checkpoint =
        std::fs::read_to_string(follower.dir().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(checkpoint, "0\n1\n0 0\n");

    // An offset inside a batch takes the whole batch: the log ends where it began.
    assert!(follower.truncate_to(3).unwrap());
    assert_eq!(follower.log_end_offset(), 2);
    assert_eq!(follower.segment_base_offsets(), vec![0, 2]);
    assert!(!follower.truncate_to(2).unwrap());

    // The truncated log takes the leader's batches again and reopens as it was left.
    let bytes = fetch_all(&leader);
    let ranges = batch::split_batches(&bytes).unwrap();
    follower
        .append_as_follower(&bytes[ranges[1].start..], NOW)
        .unwrap();
    assert_eq!(fetch_all(&follower), bytes);
    follower.close().unwrap();
    let reopened = open_log(dir.path(), config);
    assert_eq!(headers(&reopened), headers(&leader));
    assert_eq!(epochs(&reopened), vec![(0, 0), (3, 5)]);
}

#[test]
fn truncating_fully_empties_the_log_and_starts_it_at_the_leaders_offset() {
    let dir = tempfile::tempdir().unwrap();
    let leader = leader(dir.path(), LogConfig::default());
    let mut follower = open_log(dir.path(), LogConfig::default());
    follower
        .append_as_follower(&fetch_all(&leader), NOW)
        .unwrap();
    follower.roll(NOW).unwrap();

    follower.truncate_fully_and_start_at(40).unwrap();
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (40, 40)
    );
    assert_eq!(follower.segment_base_offsets(), vec![40]);
    assert!(epochs(&follower).is_empty());
    assert!(follower.producer_state().producers().is_empty());
    let snapshots = std::fs::read_dir(follower.dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".snapshot")
        })
        .count();
    assert_eq!(snapshots, 0);

    let mut next = TestBatch::simple(2, NOW).encode();
    batch::set_base_offset(&mut next, 40);
    batch::set_partition_leader_epoch(&mut next, 4);
    follower.append_as_follower(&next, NOW).unwrap();
    assert_eq!(epochs(&follower), vec![(4, 40)]);
    assert_eq!(fetch_all(&follower), next);
}

#[test]
fn truncating_below_the_first_segment_truncates_fully() {
    let dir = tempfile::tempdir().unwrap();
    let mut follower = open_log(dir.path(), LogConfig::default());
    follower.truncate_fully_and_start_at(10).unwrap();
    let mut batch = TestBatch::simple(3, NOW).encode();
    batch::set_base_offset(&mut batch, 10);
    follower.append_as_follower(&batch, NOW).unwrap();
    assert!(follower.truncate_to(4).unwrap());
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (4, 4)
    );
    assert_eq!(follower.segment_base_offsets(), vec![4]);
}
