//! The metadata log's own settings, and its snapshots standing in for the log before them.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krust_storage::{LogConfig, LogManager, TopicPartition};
use tempfile::TempDir;

use super::*;
use crate::metadata::metadata_log::MetadataLogSettings;

const LOCAL: i32 = 1;

fn metadata_tp() -> TopicPartition {
    TopicPartition::new(METADATA_LOG_TOPIC, 0)
}

/// A keyless batch of one record of `size` bytes stamped at `timestamp`.
fn metadata_batch(timestamp: i64, size: usize) -> BytesMut {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: None,
        value: Some(Bytes::from(vec![b'm'; size])),
        headers: Default::default(),
    };
    let mut batch = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut batch, [&record], &options).unwrap();
    batch
}

fn open(dir: &TempDir, settings: MetadataLogSettings) -> ReplicaManager {
    let log_manager = LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap();
    ReplicaManager::new(LOCAL, log_manager, LogConfig::default(), settings)
}

/// Rolls a segment per append (each a millisecond or more after the last).
fn rolling_every_append(max_retention_bytes: i64, max_retention_ms: i64) -> MetadataLogSettings {
    MetadataLogSettings {
        segment_ms: 1,
        max_retention_bytes,
        max_retention_ms,
        ..MetadataLogSettings::default()
    }
}

fn append_at(manager: &ReplicaManager, timestamps: impl IntoIterator<Item = i64>) {
    for timestamp in timestamps {
        manager
            .append_internal(&metadata_tp(), &metadata_batch(timestamp, 8), timestamp)
            .unwrap();
    }
}

fn records(n: u8) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(vec![i; 3])).collect()
}

fn snapshot_files(dir: &TempDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("__cluster_metadata-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".checkpoint"))
        .collect();
    names.sort();
    names
}

fn log_start_and_segments(manager: &ReplicaManager) -> (i64, Vec<i64>) {
    let log = manager.log_manager().get(&metadata_tp()).unwrap();
    let log = log.lock();
    (log.log_start_offset(), log.segment_base_offsets())
}

#[test]
fn the_metadata_log_rolls_by_its_own_segment_settings() {
    // By time: a data topic's default keeps one segment, the metadata log rolls.
    let dir = tempfile::tempdir().unwrap();
    let manager = open(&dir, rolling_every_append(-1, -1));
    append_at(&manager, [0, 10, 20]);
    assert_eq!(log_start_and_segments(&manager).1, vec![0, 1, 2]);
    // By size: 8 MiB segments, where the broker default is 1 GiB.
    let dir = tempfile::tempdir().unwrap();
    let settings = MetadataLogSettings {
        segment_bytes: 8 << 20,
        ..MetadataLogSettings::default()
    };
    let manager = open(&dir, settings);
    for _ in 0..90 {
        manager
            .append_internal(&metadata_tp(), &metadata_batch(0, 100 << 10), 0)
            .unwrap();
    }
    let segments = log_start_and_segments(&manager).1;
    assert_eq!(segments.len(), 2, "{segments:?}");
}

#[test]
fn a_newer_snapshot_lets_the_log_and_snapshots_before_it_go_over_the_size_budget() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(&dir, rolling_every_append(0, -1));
    append_at(&manager, [0, 10, 20, 30]);
    manager
        .write_metadata_snapshot(2, &records(2), 100)
        .unwrap();
    // The only snapshot stays, and so does the log before it.
    assert_eq!(log_start_and_segments(&manager), (0, vec![0, 1, 2, 3]));
    append_at(&manager, [40]);
    let path = manager
        .write_metadata_snapshot(4, &records(4), 100)
        .unwrap();
    assert!(path.ends_with("00000000000000000004-0000000000.checkpoint"));
    assert_eq!(log_start_and_segments(&manager), (4, vec![4]));
    assert_eq!(
        snapshot_files(&dir),
        vec!["00000000000000000004-0000000000.checkpoint"]
    );
    let latest = manager.latest_metadata_snapshot().unwrap().unwrap();
    assert_eq!((latest.id.end_offset, latest.records), (4, records(4)));
    assert_eq!(latest.last_contained_timestamp, 30);
    manager.shutdown().unwrap();

    // A restart finds the same snapshot and log start.
    let manager = open(&dir, rolling_every_append(0, -1));
    let latest = manager.latest_metadata_snapshot().unwrap().unwrap();
    assert_eq!(latest.id.end_offset, 4);
    assert_eq!(log_start_and_segments(&manager).0, 4);
}

#[test]
fn within_the_budget_every_snapshot_and_the_whole_log_stay() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(&dir, rolling_every_append(1 << 20, -1));
    append_at(&manager, [0, 10, 20]);
    manager
        .write_metadata_snapshot(1, &records(1), 100)
        .unwrap();
    manager
        .write_metadata_snapshot(3, &records(3), 100)
        .unwrap();
    assert_eq!(log_start_and_segments(&manager), (0, vec![0, 1, 2]));
    assert_eq!(snapshot_files(&dir).len(), 2);
}

#[test]
fn snapshots_expire_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(&dir, rolling_every_append(-1, 1_000));
    append_at(&manager, [0, 10, 2_000]);
    manager
        .write_metadata_snapshot(1, &records(1), 500)
        .unwrap();
    // Its newest record is from 0: not yet 1 s old at 900.
    manager
        .write_metadata_snapshot(2, &records(2), 900)
        .unwrap();
    assert_eq!(snapshot_files(&dir).len(), 2);
    manager
        .write_metadata_snapshot(3, &records(3), 1_500)
        .unwrap();
    // The two older ones (newest records from 0 and 10) expired; the latest always stays.
    assert_eq!(
        snapshot_files(&dir),
        vec!["00000000000000000003-0000000000.checkpoint"]
    );
    assert_eq!(log_start_and_segments(&manager), (3, vec![2]));
}

#[test]
fn a_snapshot_must_end_after_the_latest_and_within_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let manager = open(&dir, MetadataLogSettings::default());
    append_at(&manager, [0, 0, 0]);
    for end_offset in [0, 4] {
        let error = manager
            .write_metadata_snapshot(end_offset, &records(1), 0)
            .unwrap_err();
        assert!(matches!(error, SnapshotError::OutOfRange { .. }), "{error}");
    }
    manager.write_metadata_snapshot(2, &records(1), 0).unwrap();
    assert!(manager.write_metadata_snapshot(2, &records(1), 0).is_err());
    assert!(manager.write_metadata_snapshot(3, &records(1), 0).is_ok());
}

#[test]
fn the_metadata_log_is_never_compacted_whatever_log_cleanup_policy_says() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_path_buf()];
    let mut compacting = LogConfig::default();
    compacting
        .apply_override("cleanup.policy", "compact")
        .unwrap();
    let keyless = metadata_batch(0, 8);
    let tp = TopicPartition::new("__cluster_metadata", 0);
    {
        let log_manager = LogManager::open(&dirs, compacting.clone()).unwrap();
        let manager = ReplicaManager::new(
            LOCAL,
            log_manager,
            compacting.clone(),
            MetadataLogSettings::default(),
        );
        let info = manager.append_internal(&tp, &keyless, 0).unwrap();
        assert_eq!(info.first_offset, 0);
        // A topic's internal log takes the broker default as before.
        let other = TopicPartition::new("__consumer_offsets", 0);
        assert!(manager.append_internal(&other, &keyless, 0).is_err());
        manager.shutdown().unwrap();
    }
    // Loaded at start-up with the broker defaults, it is set back on first use.
    let log_manager = LogManager::open(&dirs, compacting.clone()).unwrap();
    let manager = ReplicaManager::new(
        LOCAL,
        log_manager,
        compacting,
        MetadataLogSettings::default(),
    );
    assert_eq!(
        manager
            .append_internal(&tp, &keyless, 0)
            .unwrap()
            .first_offset,
        1
    );
    let log = manager.log_manager().get(&tp).unwrap();
    assert!(!log.lock().config().cleanup_policy.compact);
}

#[test]
fn retention_never_trims_the_metadata_log_without_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("__cluster_metadata", 0);
    let expiring = LogConfig {
        retention_ms: 1,
        retention_bytes: 0,
        ..LogConfig::default()
    };
    {
        let log_manager = LogManager::open(&[dir.path().to_path_buf()], expiring.clone()).unwrap();
        let manager = ReplicaManager::new(
            LOCAL,
            log_manager,
            expiring.clone(),
            MetadataLogSettings::default(),
        );
        for _ in 0..2 {
            manager
                .append_internal(&tp, &metadata_batch(0, 8), 0)
                .unwrap();
        }
        manager.shutdown().unwrap();
    }
    // Loaded again with the (expiring) broker defaults, then used as the metadata log.
    let log_manager = LogManager::open(&[dir.path().to_path_buf()], expiring.clone()).unwrap();
    let manager = ReplicaManager::new(LOCAL, log_manager, expiring, MetadataLogSettings::default());
    assert_eq!(manager.internal_log_end_offset(&tp).unwrap(), 2);
    manager.cleanup_logs(i64::MAX);
    assert!(!manager.read_internal(&tp, 0, 1 << 20).unwrap().is_empty());
    let log = manager.log_manager().get(&tp).unwrap();
    assert_eq!(log.lock().log_start_offset(), 0);
}
