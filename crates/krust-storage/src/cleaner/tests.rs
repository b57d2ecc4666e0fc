//! The cleaner on real logs: what a consumer reading from the start sees afterwards.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::test_batches::{TestBatch, TestRecord};
use crate::batch::{check_integrity, split_batches, Compression};
use crate::batch_builder::records_area;
use crate::cleaner::clean::{clean_log, CleanError, Cleaned, LogToClean, Throttler};
use crate::cleaner::offset_map::{OffsetMap, BYTES_PER_ENTRY};
use crate::config::LogConfig;
use crate::log::Log;
use crate::log_manager::SharedLog;
use crate::log_tests::{open_log, NOW};
use crate::records::record_views;

/// One record as a consumer sees it: offset, key, value (None: tombstone).
type Seen = (i64, Vec<u8>, Option<Vec<u8>>);

fn compacted(segment_bytes: i32) -> LogConfig {
    let mut config = LogConfig::default();
    config.apply_override("cleanup.policy", "compact").unwrap();
    config.segment_bytes = segment_bytes;
    config
}

fn batch(pairs: &[(&str, Option<&str>)], timestamp: i64) -> TestBatch {
    let mut batch = TestBatch::simple(pairs.len(), timestamp);
    batch.records = pairs
        .iter()
        .enumerate()
        .map(|(i, (key, value))| TestRecord {
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            timestamp_delta: i as i64,
        })
        .collect();
    batch
}

fn append(log: &mut Log, batch: &TestBatch) {
    log.append_as_leader(&batch.encode(), 0, NOW).unwrap();
    let end = log.log_end_offset();
    log.maybe_increment_high_watermark(end);
}

/// Every record from the log start, as a consumer reads them.
fn read_all(log: &Log) -> Vec<Seen> {
    let mut seen = Vec::new();
    let mut offset = log.log_start_offset();
    loop {
        let plan_at = log.read_plan(offset, log.log_end_offset()).unwrap();
        let data = plan_at.read(usize::MAX, true).unwrap();
        if data.records.is_empty() {
            break;
        }
        let bytes = data.records.read_bytes().unwrap();
        for range in split_batches(&bytes).unwrap() {
            let header = check_integrity(&bytes[range.clone()]).unwrap();
            let area = records_area(&bytes[range], &header, 1 << 24).unwrap();
            for record in record_views(&area) {
                let record = record.unwrap();
                seen.push((
                    header.base_offset + i64::from(record.offset_delta),
                    record.key.unwrap().to_vec(),
                    record.value.map(<[u8]>::to_vec),
                ));
            }
        }
        offset = data.next_offset;
    }
    seen
}

fn clean(log: &SharedLog, checkpoint: Option<i64>, now_ms: i64) -> Result<Cleaned, CleanError> {
    clean_with_map(log, checkpoint, now_ms, 1 << 20)
}

fn clean_with_map(
    log: &SharedLog,
    checkpoint: Option<i64>,
    now_ms: i64,
    map_bytes: usize,
) -> Result<Cleaned, CleanError> {
    let to_clean = LogToClean::take(&log.lock(), checkpoint, now_ms);
    let abort = AtomicBool::new(false);
    let mut throttler = Throttler::new(f64::MAX, &abort);
    let mut map = OffsetMap::new(map_bytes);
    clean_log(log, &to_clean, &mut map, &mut throttler, now_ms)
}

/// Three keys written ten times each over many small segments, plus one deleted key.
fn write_versions(log: &mut Log, codec: Compression) {
    for version in 0..10 {
        let value = format!("v{version}");
        let mut pairs = vec![
            ("a", Some(value.as_str())),
            ("b", Some(value.as_str())),
            ("c", Some(value.as_str())),
        ];
        if version == 0 {
            pairs.push(("gone", Some("soon deleted")));
        }
        if version == 5 {
            pairs.push(("gone", None));
        }
        append(log, &batch(&pairs, NOW + version).compressed(codec));
    }
    // The active segment is never cleaned: roll past the last batch.
    log.roll(NOW).unwrap();
}

fn latest_per_key(seen: &[Seen]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    seen.iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Each small segment cleaned on its own: those holding only overwritten values are left
/// empty, and a read from the log start must pass over all of them (a consumer reading a
/// compacted topic, or a coordinator loading `__consumer_offsets` after a restart).
#[test]
fn a_read_from_the_start_passes_over_the_segments_a_clean_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(300));
    for version in 0..10 {
        let value = format!("v{version}");
        let pairs = [("a", Some(value.as_str())), ("b", Some(value.as_str()))];
        append(&mut log, &batch(&pairs, NOW + version));
    }
    log.roll(NOW).unwrap();
    let before = read_all(&log);
    let log: SharedLog = Arc::new(Mutex::new(log));
    clean(&log, None, NOW).unwrap();
    let log = log.lock();
    let mut sizes: Vec<(String, u64)> = fs::read_dir(log.dir())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, entry.metadata().unwrap().len())
        })
        .collect();
    sizes.sort();
    assert!(
        sizes.iter().take(2).all(|(_, size)| *size == 0),
        "the first two segments are emptied: {sizes:?}"
    );
    assert_eq!(latest_per_key(&read_all(&log)), latest_per_key(&before));
}

#[test]
fn a_clean_keeps_the_latest_value_of_each_key_at_its_offset() {
    for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), compacted(300));
        write_versions(&mut log, codec);
        let before = read_all(&log);
        let segments_before = log.segment_count();
        // Larger segments now: the small ones are rewritten together.
        log.update_config(compacted(100_000)).unwrap();
        let log: SharedLog = Arc::new(Mutex::new(log));
        let cleaned = clean(&log, None, NOW).unwrap();
        let log = log.lock();
        let after = read_all(&log);
        // The latest of a, b, c (offsets 29..31 hold v9) and gone's tombstone, kept once.
        let offsets: Vec<i64> = after.iter().map(|(o, _, _)| *o).collect();
        assert_eq!(offsets, vec![19, 29, 30, 31], "{codec:?}");
        assert_eq!(latest_per_key(&after), latest_per_key(&before), "{codec:?}");
        assert!(segments_before > 3, "{codec:?}: {segments_before}");
        assert_eq!(
            log.segment_count(),
            2,
            "{codec:?}: one cleaned segment and the active one"
        );
        assert_eq!(cleaned.first_dirty_offset, 32);
        assert_eq!(cleaned.stats.records_retained, 4);
        assert_eq!(log.log_end_offset(), 32);
    }
}

#[test]
fn a_tombstone_outlives_one_clean_by_delete_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = compacted(300);
    config.delete_retention_ms = 60_000;
    let mut log = open_log(dir.path(), config);
    write_versions(&mut log, Compression::None);
    let log: SharedLog = Arc::new(Mutex::new(log));
    let first = clean(&log, None, NOW).unwrap();
    assert_eq!(first.tombstone_horizon, Some(NOW + 60_000));
    let has_gone = |log: &SharedLog| read_all(&log.lock()).iter().any(|(_, k, _)| k == b"gone");
    assert!(has_gone(&log));
    // Before the horizon a second clean keeps it; at the horizon it is gone.
    let second = clean(&log, Some(first.first_dirty_offset), NOW + 59_999).unwrap();
    assert!(has_gone(&log));
    assert_eq!(second.tombstone_horizon, Some(NOW + 60_000));
    let third = clean(&log, Some(second.first_dirty_offset), NOW + 60_000).unwrap();
    assert!(!has_gone(&log));
    assert_eq!(third.tombstone_horizon, None);
    let keys: Vec<Vec<u8>> = read_all(&log.lock())
        .into_iter()
        .map(|(_, k, _)| k)
        .collect();
    assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
}

#[test]
fn records_younger_than_min_compaction_lag_and_the_active_segment_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = compacted(300);
    config.min_compaction_lag_ms = 1_000;
    let mut log = open_log(dir.path(), config);
    write_versions(&mut log, Compression::None);
    append(&mut log, &batch(&[("a", Some("active"))], NOW + 100));
    let log: SharedLog = Arc::new(Mutex::new(log));
    // Every record is younger than the lag: nothing is cleaned.
    let untouched = read_all(&log.lock());
    clean(&log, None, NOW + 500).unwrap();
    assert_eq!(read_all(&log.lock()), untouched);
    let cleaned = clean(&log, None, NOW + 10_000).unwrap();
    let after = read_all(&log.lock());
    assert_eq!(cleaned.first_dirty_offset, 32);
    assert_eq!(
        after.last().unwrap(),
        &(32, b"a".to_vec(), Some(b"active".to_vec()))
    );
    assert_eq!(after.len(), 5);
}

#[test]
fn a_small_dedupe_buffer_cleans_in_several_passes_without_losing_a_latest_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(300));
    write_versions(&mut log, Compression::None);
    let expected = latest_per_key(&read_all(&log));
    let log: SharedLog = Arc::new(Mutex::new(log));
    let tiny = clean_with_map(&log, None, NOW, 2 * BYTES_PER_ENTRY);
    assert!(matches!(tiny, Err(CleanError::DedupeBufferTooSmall)));
    // Room for 5 keys: one batch per pass.
    let map_bytes = 6 * BYTES_PER_ENTRY;
    let mut checkpoint = None;
    let mut passes = 0;
    while checkpoint != Some(32) {
        let cleaned = clean_with_map(&log, checkpoint, NOW, map_bytes).unwrap();
        checkpoint = Some(cleaned.first_dirty_offset);
        passes += 1;
        assert!(passes < 20);
        assert_eq!(latest_per_key(&read_all(&log.lock())), expected);
    }
    assert!(passes > 1);
    assert_eq!(read_all(&log.lock()).len(), 4);
}

#[test]
fn a_producers_last_batch_stays_as_an_empty_batch_and_its_state_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(300));
    let idempotent = batch(&[("a", Some("p0")), ("b", Some("p1"))], NOW).idempotent(7, 3, 0);
    append(&mut log, &idempotent);
    let earlier = batch(&[("c", Some("old"))], NOW).idempotent(8, 0, 0);
    append(&mut log, &earlier);
    append(
        &mut log,
        &batch(&[("c", Some("x"))], NOW).idempotent(8, 0, 1),
    );
    for _ in 0..3 {
        append(&mut log, &batch(&[("a", Some("n")), ("b", Some("n"))], NOW));
    }
    log.roll(NOW).unwrap();
    let log: SharedLog = Arc::new(Mutex::new(log));
    clean(&log, None, NOW).unwrap();
    let mut log = Arc::try_unwrap(log).ok().unwrap().into_inner();
    let plan = log.read_plan(0, log.log_end_offset()).unwrap();
    let bytes = plan
        .read(usize::MAX, true)
        .unwrap()
        .records
        .read_bytes()
        .unwrap();
    let headers: Vec<_> = split_batches(&bytes)
        .unwrap()
        .into_iter()
        .map(|r| check_integrity(&bytes[r]).unwrap())
        .collect();
    // Producer 7's only batch lost both records but stays, empty, with its offsets and
    // sequence; producer 8's superseded first batch goes.
    let first = headers[0];
    assert_eq!((first.producer_id, first.records_count), (7, 0));
    assert_eq!(
        (
            first.base_offset,
            first.last_offset(),
            first.last_sequence()
        ),
        (0, 1, 1)
    );
    assert_eq!((headers[1].producer_id, headers[1].base_offset), (8, 3));
    log.close().unwrap();
    // Without its snapshots the producer state is rebuilt from the cleaned log.
    let partition_dir = dir.path().join("t-0");
    for entry in fs::read_dir(&partition_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            fs::remove_file(path).unwrap();
        }
    }
    let reopened = open_log(dir.path(), compacted(300));
    let producers = reopened.producer_state().producers();
    let last = producers[&7].batches.back().unwrap();
    assert_eq!(
        (
            producers[&7].producer_epoch,
            last.last_seq,
            last.last_offset
        ),
        (3, 1, 1)
    );
    assert_eq!(producers[&8].batches.back().unwrap().last_seq, 1);
}

/// Copies the partition directory's files.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn loading_completes_a_swap_and_discards_a_cleaned_segment_a_crash_left() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(100_000));
    write_versions(&mut log, Compression::None);
    let original = read_all(&log);
    log.close().unwrap();
    let partition = dir.path().join("t-0");
    let pristine = tempfile::tempdir().unwrap();
    copy_dir(&partition, &pristine.path().join("t-0"));

    let log: SharedLog = Arc::new(Mutex::new(open_log(dir.path(), compacted(100_000))));
    // Its leader confirms the reopened records again (they are all committed).
    log.lock().maybe_increment_high_watermark(i64::MAX);
    clean(&log, None, NOW).unwrap();
    let cleaned = read_all(&log.lock());
    assert_eq!(cleaned.len(), 4);
    log.lock().close().unwrap();
    let cleaned_segment = fs::read(partition.join("00000000000000000000.log")).unwrap();

    // A crash after the `.swap` rename: the old segment is still there; loading finishes.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(&pristine.path().join("t-0"), &crashed.path().join("t-0"));
    let swap = crashed.path().join("t-0/00000000000000000000.log.swap");
    fs::write(&swap, &cleaned_segment).unwrap();
    let reopened = open_log(crashed.path(), compacted(100_000));
    assert_eq!(read_all(&reopened), cleaned);
    assert!(!swap.exists());

    // A crash after the log file's final rename, before its indexes': they are renamed too.
    let crashed = tempfile::tempdir().unwrap();
    let crashed_partition = crashed.path().join("t-0");
    copy_dir(&partition, &crashed_partition);
    for kind in ["index", "timeindex"] {
        let path =
            |suffix: &str| crashed_partition.join(format!("00000000000000000000.{kind}{suffix}"));
        fs::rename(path(""), path(".swap")).unwrap();
    }
    let reopened = open_log(crashed.path(), compacted(100_000));
    assert_eq!(read_all(&reopened), cleaned);
    let names: Vec<String> = fs::read_dir(&crashed_partition)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".swap")), "{names:?}");
    assert!(names.contains(&"00000000000000000000.index".to_string()));

    // A crash before it: the `.cleaned` files go, the log is as it was.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(&pristine.path().join("t-0"), &crashed.path().join("t-0"));
    let leftover = crashed.path().join("t-0/00000000000000000000.log.cleaned");
    fs::write(&leftover, &cleaned_segment).unwrap();
    fs::write(
        crashed
            .path()
            .join("t-0/00000000000000000000.index.cleaned"),
        [0; 8],
    )
    .unwrap();
    // A file that only looks like a swap is left alone.
    fs::write(crashed.path().join("t-0/notes.swap"), b"not a segment").unwrap();
    let reopened = open_log(crashed.path(), compacted(100_000));
    assert_eq!(read_all(&reopened), original);
    assert!(!leftover.exists());
}

#[test]
fn a_log_that_changed_meanwhile_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(300));
    write_versions(&mut log, Compression::None);
    let to_clean = LogToClean::take(&log, None, NOW);
    log.close().unwrap();
    let log: SharedLog = Arc::new(Mutex::new(log));
    let abort = AtomicBool::new(false);
    let mut throttler = Throttler::new(f64::MAX, &abort);
    let mut map = OffsetMap::new(1 << 20);
    let result = clean_log(&log, &to_clean, &mut map, &mut throttler, NOW);
    assert!(matches!(result, Err(CleanError::LogChanged)));
    let leftovers = fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".cleaned")
        })
        .count();
    assert_eq!(leftovers, 0);
}

fn shared_log(root: &Path, topic: &str, config: LogConfig) -> SharedLog {
    let tp = crate::TopicPartition::new(topic, 0);
    let log = Log::open(
        &root.join(tp.dir_name()),
        tp,
        None,
        config,
        crate::LoadParams::default(),
        NOW,
    )
    .unwrap();
    Arc::new(Mutex::new(log))
}

#[test]
fn the_manager_picks_a_due_compacted_log_checkpoints_its_clean_and_returns_for_tombstones() {
    use crate::cleaner::manager::{CleanerManager, CLEANER_OFFSET_CHECKPOINT_FILE};
    use parking_lot::RwLock;

    let root = tempfile::tempdir().unwrap();
    let mut young = compacted(300);
    young.min_compaction_lag_ms = i64::MAX / 2;
    let plain = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let logs: BTreeMap<_, _> = [
        ("plain", plain),
        ("compacted", compacted(300)),
        ("young", young),
    ]
    .into_iter()
    .map(|(topic, config)| {
        let log = shared_log(root.path(), topic, config);
        write_versions(&mut log.lock(), Compression::None);
        (crate::TopicPartition::new(topic, 0), log)
    })
    .collect();
    let manager = CleanerManager::new(&[root.path().to_path_buf()], Arc::new(RwLock::new(logs)));
    let (log, to_clean) = manager.grab_filthiest(NOW).unwrap();
    // "plain" is not compacted; all of "young" is within min.compaction.lag.ms.
    assert_eq!(to_clean.topic_partition.topic, "compacted");
    assert_eq!(to_clean.dirty_ratio(), 1.0);
    assert_eq!(manager.status().max_dirty_percent, 100.0);
    assert!(manager.grab_filthiest(NOW).is_none(), "it is being cleaned");

    let abort = AtomicBool::new(false);
    let mut throttler = Throttler::new(f64::MAX, &abort);
    let mut map = OffsetMap::new(1 << 20);
    let result = clean_log(&log, &to_clean, &mut map, &mut throttler, NOW);
    manager.done(&to_clean, result);
    let checkpoint = fs::read_to_string(root.path().join(CLEANER_OFFSET_CHECKPOINT_FILE)).unwrap();
    assert_eq!(checkpoint, "0\n1\ncompacted 0 32\n");
    let status = manager.status();
    assert_eq!(status.cleans_completed, 1);
    assert_eq!(status.last_clean.unwrap().records_retained, 4);

    // Clean now; due again only once the kept tombstone's delete horizon has passed.
    assert!(manager.grab_filthiest(NOW + 1).is_none());
    assert_eq!(manager.status().dirty_bytes, 0);
    let horizon = NOW + LogConfig::default().delete_retention_ms;
    let (_, again) = manager.grab_filthiest(horizon).unwrap();
    assert_eq!(again.topic_partition.topic, "compacted");
    assert_eq!(again.first_dirty_offset, 32);
}

#[test]
fn max_compaction_lag_makes_a_log_due_below_its_dirty_ratio() {
    use crate::cleaner::manager::{CleanerManager, CLEANER_OFFSET_CHECKPOINT_FILE};
    use parking_lot::RwLock;

    let root = tempfile::tempdir().unwrap();
    let mut lagging = compacted(300);
    lagging.min_cleanable_dirty_ratio = 1.0;
    lagging.max_compaction_lag_ms = 10_000;
    let mut prompt = lagging.clone();
    prompt.max_compaction_lag_ms = i64::MAX;
    let logs: BTreeMap<_, _> = [("lagging", lagging), ("prompt", prompt)]
        .into_iter()
        .map(|(topic, config)| {
            let log = shared_log(root.path(), topic, config);
            write_versions(&mut log.lock(), Compression::None);
            (crate::TopicPartition::new(topic, 0), log)
        })
        .collect();
    // The first two segments count as clean: the dirty ratio stays below 1.0.
    let clean_end = logs.values().next().unwrap().lock().segment_base_offsets()[2];
    fs::write(
        root.path().join(CLEANER_OFFSET_CHECKPOINT_FILE),
        format!("0\n2\nlagging 0 {clean_end}\nprompt 0 {clean_end}\n"),
    )
    .unwrap();
    let manager = CleanerManager::new(&[root.path().to_path_buf()], Arc::new(RwLock::new(logs)));
    // The oldest dirty record is NOW + a few ms: overdue only after 10 s more.
    assert!(manager.grab_filthiest(NOW + 10_000).is_none());
    let (_, due) = manager.grab_filthiest(NOW + 10_010).unwrap();
    assert_eq!(due.topic_partition.topic, "lagging");
    assert_eq!(due.first_dirty_offset, clean_end);
    assert!(due.dirty_ratio() < 1.0);
    assert!(manager.grab_filthiest(NOW + 10_010).is_none());
}

#[test]
fn replaced_segments_stay_as_deleted_files_until_file_delete_delay_ms() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), compacted(300));
    write_versions(&mut log, Compression::None);
    let mut bigger = compacted(100_000);
    bigger.file_delete_delay_ms = 300;
    log.update_config(bigger).unwrap();
    let scheduler = Arc::new(crate::scheduler::Scheduler::start("test-cleaner-delete").unwrap());
    log.set_scheduler(Arc::clone(&scheduler));
    let log_dir = log.dir().to_path_buf();
    let log: SharedLog = Arc::new(Mutex::new(log));
    clean(&log, None, NOW).unwrap();
    let deleted = || {
        fs::read_dir(&log_dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_str()
                    .unwrap()
                    .ends_with(crate::segment::DELETED_FILE_SUFFIX)
            })
            .count()
    };
    // A fetch that opened a replaced segment before the swap can still read it.
    assert!(deleted() > 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while deleted() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(deleted(), 0);
    assert_eq!(latest_per_key(&read_all(&log.lock())).len(), 4);
}

#[test]
fn an_io_error_while_cleaning_takes_the_log_dir_offline() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().to_path_buf()];
    let manager = crate::LogManager::open(&dirs, LogConfig::default()).unwrap();
    let tp = crate::TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None, compacted(300)).unwrap();
    write_versions(&mut log.lock(), Compression::None);
    // The open segments still read; writing the cleaned segment next to them fails.
    fs::remove_dir_all(log.lock().dir()).unwrap();
    let config = crate::CleanerConfig {
        backoff_ms: 10,
        ..crate::CleanerConfig::default()
    };
    manager.start_cleaner(&config).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while manager.failure_channel().offline_dirs().is_empty()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(manager.failure_channel().offline_dirs(), dirs.to_vec());
}

#[test]
fn a_log_moved_to_another_log_dir_takes_its_cleaner_checkpoint_along() {
    use crate::cleaner::manager::{CleanerManager, CLEANER_OFFSET_CHECKPOINT_FILE};
    use parking_lot::RwLock;

    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("d1"), root.path().join("d2")];
    fs::create_dir_all(&dirs[1]).unwrap();
    let log = shared_log(&dirs[0], "compacted", compacted(300));
    let tp = crate::TopicPartition::new("compacted", 0);
    fs::write(
        dirs[0].join(CLEANER_OFFSET_CHECKPOINT_FILE),
        "0\n1\ncompacted 0 32\n",
    )
    .unwrap();
    let logs = BTreeMap::from([(tp.clone(), log)]);
    let manager = CleanerManager::new(&dirs, Arc::new(RwLock::new(logs)));
    manager.move_checkpoint(&tp, &dirs[0], &dirs[1]);
    let read = |dir: &Path| fs::read_to_string(dir.join(CLEANER_OFFSET_CHECKPOINT_FILE)).unwrap();
    assert_eq!(read(&dirs[0]), "0\n0\n");
    assert_eq!(read(&dirs[1]), "0\n1\ncompacted 0 32\n");
}

#[test]
fn a_reconfigured_cleaner_restarts_its_threads_with_the_new_settings() {
    let root = tempfile::tempdir().unwrap();
    let manager =
        crate::LogManager::open(&[root.path().to_path_buf()], LogConfig::default()).unwrap();
    let sleepy = crate::CleanerConfig {
        backoff_ms: 3_600_000,
        ..crate::CleanerConfig::default()
    };
    manager.start_cleaner(&sleepy).unwrap();
    let tp = crate::TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None, compacted(300)).unwrap();
    // The thread found nothing to clean and sleeps for an hour.
    std::thread::sleep(std::time::Duration::from_millis(100));
    write_versions(&mut log.lock(), Compression::None);
    assert_eq!(manager.cleaner_status().unwrap().cleans_completed, 0);

    let eager = crate::CleanerConfig {
        threads: 2,
        backoff_ms: 10,
        ..sleepy
    };
    manager.reconfigure_cleaner(&eager).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while manager.cleaner_status().unwrap().cleans_completed == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(manager.cleaner_status().unwrap().cleans_completed, 1);
}
