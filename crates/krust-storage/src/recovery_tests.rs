//! Restart behaviour: kill -9 (a dropped, unclosed log), torn tails, bit flips, clean restarts.

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::batch::split_batches;
use crate::batch::test_batches::TestBatch;
use crate::config::LogConfig;
use crate::log::LoadParams;
use crate::log_tests::{open_log, open_log_with, read_all, NOW};
use crate::segment::offset_file_path;

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 120,
        segment_index_bytes: 8 * 64,
        ..LogConfig::default()
    }
}

fn unclean(recovery_point: i64) -> LoadParams {
    LoadParams {
        recovery_point,
        log_start_offset: 0,
        had_clean_shutdown: false,
        high_watermark: 0,
    }
}

fn segment_log_path(root: &Path, base: i64) -> PathBuf {
    offset_file_path(&root.join("t-0"), base, ".log")
}

#[derive(Clone, Debug)]
enum Damage {
    Truncate { at_permille: u32 },
    FlipBit { at_permille: u32, bit: u8 },
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0u32..=1000).prop_map(|at_permille| Damage::Truncate { at_permille }),
        (0u32..1000, 0u8..8).prop_map(|(at_permille, bit)| Damage::FlipBit { at_permille, bit }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn recovery_keeps_every_batch_before_the_damage_and_nothing_corrupt(
        counts in proptest::collection::vec(1usize..6, 2..25),
        segment_pick in 0usize..100,
        damage in damage_strategy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), small_segments());
        for (i, count) in counts.iter().enumerate() {
            log.append_as_leader(&TestBatch::simple(*count, NOW + i as i64).encode(), 1, NOW).unwrap();
        }
        let before = read_all(&log);
        let bases = log.segment_base_offsets();
        drop(log);

        let base = bases[segment_pick % bases.len()];
        let path = segment_log_path(dir.path(), base);
        let mut bytes = fs::read(&path).unwrap();
        let batch_ends: Vec<usize> = split_batches(&bytes).unwrap().iter().map(|r| r.end).collect();
        let damaged_at = match damage {
            Damage::Truncate { at_permille } => {
                let at = bytes.len() * at_permille as usize / 1000;
                bytes.truncate(at);
                at
            }
            Damage::FlipBit { at_permille, bit } => {
                if bytes.is_empty() {
                    return Ok(());
                }
                let mut at = bytes.len() * at_permille as usize / 1000;
                // baseOffset (batch bytes 0..8) and partitionLeaderEpoch (12..16) are outside
                // the CRC in Kafka's format, and the cleaner leaves gaps between base offsets,
                // so a flip there that keeps offsets growing is undetectable by design: flip
                // the CRC instead.
                let batch_start = batch_ends.iter().rev().find(|end| **end <= at).copied().unwrap_or(0);
                if (0..8).contains(&(at - batch_start)) || (12..16).contains(&(at - batch_start)) {
                    at = batch_start + 17;
                }
                bytes[at] ^= 1 << bit;
                at
            }
        };
        fs::write(&path, &bytes).unwrap();
        let intact_in_segment = batch_ends.iter().filter(|end| **end <= damaged_at).count();
        let next_base = bases.iter().copied().find(|b| *b > base);
        let in_segment = |offset: i64| offset >= base && next_base.is_none_or(|next| offset < next);
        let first_in_segment = before.iter().filter(|(h, _)| h.base_offset < base).count();
        // A cut at a batch boundary leaves a shorter but valid segment: nothing is corrupt, so
        // (as in Kafka) the segments after it are kept, only the cut-off batches are gone.
        let clean_cut = matches!(damage, Damage::Truncate { .. })
            && (damaged_at == 0 || batch_ends.contains(&damaged_at));
        let expected: Vec<_> = before
            .iter()
            .enumerate()
            .filter(|(i, (h, _))| {
                if in_segment(h.base_offset) {
                    *i < first_in_segment + intact_in_segment
                } else {
                    h.base_offset < base || clean_cut
                }
            })
            .map(|(_, batch)| batch.clone())
            .collect();
        let expected_end = match expected.last() {
            Some((h, _)) if h.base_offset >= base => h.last_offset() + 1,
            // Nothing left from the damaged segment on: it stays, empty, as the active one.
            _ => base,
        };

        let mut recovered = open_log_with(dir.path(), small_segments(), unclean(0));
        let after = read_all(&recovered);
        prop_assert_eq!(&after, &expected);
        prop_assert_eq!(recovered.log_end_offset(), expected_end);
        let info = recovered.append_as_leader(&TestBatch::simple(2, NOW).encode(), 2, NOW).unwrap();
        prop_assert_eq!(info.first_offset, expected_end);
        prop_assert_eq!(read_all(&recovered).len(), expected.len() + 1);
    }
}

#[test]
fn a_killed_log_reopens_with_everything_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    for i in 0..20 {
        log.append_as_leader(&TestBatch::simple(3, NOW + i).encode(), 0, NOW)
            .unwrap();
    }
    let before = read_all(&log);
    drop(log);
    let reopened = open_log_with(dir.path(), small_segments(), unclean(0));
    assert_eq!(read_all(&reopened), before);
    assert_eq!(reopened.log_end_offset(), 60);
    // Batch 17 holds offsets 51..=53 at NOW + 17, 18, 19.
    assert_eq!(
        reopened
            .fetch_offset_by_timestamp(NOW + 19)
            .unwrap()
            .unwrap()
            .offset,
        53
    );
}

#[test]
fn a_clean_restart_and_segments_below_the_recovery_point_are_not_rescanned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    for i in 0..20 {
        log.append_as_leader(&TestBatch::simple(3, NOW + i).encode(), 0, NOW)
            .unwrap();
    }
    log.close().unwrap();
    let end = log.log_end_offset();
    drop(log);
    // Damage the middle of the first (sealed, flushed) segment: a clean open trusts it, and
    // so does an unclean open whose recovery point is past it.
    let path = segment_log_path(dir.path(), 0);
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    let clean = LoadParams {
        had_clean_shutdown: true,
        ..LoadParams::default()
    };
    assert_eq!(
        open_log_with(dir.path(), small_segments(), clean).log_end_offset(),
        end
    );
    assert_eq!(
        open_log_with(dir.path(), small_segments(), unclean(end)).log_end_offset(),
        end
    );
    assert!(open_log_with(dir.path(), small_segments(), unclean(0)).log_end_offset() < end);
}

#[test]
fn producer_state_survives_a_kill_through_snapshot_plus_log_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    let mut last = Vec::new();
    for seq in 0..15 {
        last = TestBatch::simple(2, NOW)
            .idempotent(77, 4, seq * 2)
            .encode();
        log.append_as_leader(&last, 0, NOW).unwrap();
    }
    assert!(log.segment_count() > 1);
    drop(log);
    let mut reopened = open_log_with(dir.path(), small_segments(), unclean(0));
    let retry = reopened.append_as_leader(&last, 0, NOW).unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (28, 29));
    let gap = TestBatch::simple(1, NOW).idempotent(77, 4, 31).encode();
    assert_eq!(
        reopened
            .append_as_leader(&gap, 0, NOW)
            .unwrap_err()
            .kafka_error_code(),
        45
    );
    let next = TestBatch::simple(1, NOW).idempotent(77, 4, 30).encode();
    assert_eq!(
        reopened
            .append_as_leader(&next, 0, NOW)
            .unwrap()
            .first_offset,
        30
    );
}

#[test]
fn missing_index_files_are_rebuilt_even_after_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    for i in 0..20 {
        log.append_as_leader(&TestBatch::simple(3, NOW + i).encode(), 0, NOW)
            .unwrap();
    }
    let before = read_all(&log);
    log.close().unwrap();
    drop(log);
    let index = offset_file_path(&dir.path().join("t-0"), 0, ".index");
    let original = fs::read(&index).unwrap();
    assert!(!original.is_empty());
    fs::remove_file(&index).unwrap();
    let clean = LoadParams {
        had_clean_shutdown: true,
        ..LoadParams::default()
    };
    let reopened = open_log_with(dir.path(), small_segments(), clean);
    assert_eq!(read_all(&reopened), before);
    drop(reopened);
    assert_eq!(fs::read(&index).unwrap(), original);
}

#[test]
fn recovery_derives_leader_epochs_whose_unsynced_checkpoint_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), small_segments());
    for (epoch, count) in [(0, 3), (2, 4), (5, 2)] {
        for _ in 0..count {
            log.append_as_leader(&TestBatch::simple(2, NOW).encode(), epoch, NOW)
                .unwrap();
        }
    }
    drop(log);
    // A crash before the first checkpoint write reached the disk leaves an empty file.
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    fs::write(&checkpoint, b"").unwrap();

    let reopened = open_log_with(dir.path(), small_segments(), unclean(0));
    let epochs: Vec<(i32, i64)> = reopened
        .leader_epoch_cache()
        .entries()
        .iter()
        .map(|entry| (entry.epoch, entry.start_offset))
        .collect();
    assert_eq!(epochs, [(0, 0), (2, 6), (5, 14)]);
    assert_eq!(reopened.end_offset_for_epoch(2), (2, 14));
}
