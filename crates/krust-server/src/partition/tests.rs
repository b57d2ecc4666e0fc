//! `Partition`'s transitions and high-watermark rules.

use krust_storage::{LogConfig, LogManager, TopicPartition};
use tempfile::TempDir;

use super::*;

const LOCAL: i32 = 1;
const NOW: i64 = 1_700_000_000_000;
const LAG_MS: i64 = 30_000;

struct Fixture {
    _dir: TempDir,
    manager: LogManager,
    partition: Partition,
}

fn fixture() -> Fixture {
    fixture_with(LogConfig::default())
}

fn fixture_with(config: LogConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None, config).unwrap();
    let failures = manager.failure_channel().clone();
    let partition = Partition::new(tp, Uuid::nil(), LOCAL, LAG_MS, log, failures);
    Fixture {
        _dir: dir,
        manager,
        partition,
    }
}

fn placement(leader: i32, leader_epoch: i32, replicas: &[i32], isr: &[i32]) -> PartitionMetadata {
    PartitionMetadata {
        partition: 0,
        leader,
        leader_epoch,
        partition_epoch: leader_epoch,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
    }
}

/// An uncompressed batch of `count` records, as a client sends it.
fn batch(count: usize) -> Vec<u8> {
    let records: Vec<(Option<bytes::Bytes>, Option<bytes::Bytes>)> = (0..count)
        .map(|i| (None, Some(bytes::Bytes::from(format!("v{i}")))))
        .collect();
    crate::broker::encode_batch(&records, NOW).unwrap().to_vec()
}

fn append(partition: &Partition, count: usize) -> Result<LogAppendInfo, PartitionError> {
    partition.append_as_leader(&batch(count), 1, NOW)
}

#[test]
fn acks_all_below_min_insync_replicas_is_refused_and_writes_nothing() {
    let mut config = LogConfig::default();
    config.apply_override("min.insync.replicas", "2").unwrap();
    let f = fixture_with(config);
    f.partition.apply(&placement(LOCAL, 0, &[LOCAL], &[LOCAL]));
    let error = f
        .partition
        .append_as_leader(&batch(1), -1, NOW)
        .unwrap_err();
    assert_eq!(
        error.kafka_error_code(),
        ResponseError::NotEnoughReplicas.code()
    );
    assert!(
        error.to_string().contains("min.isr requirement of 2"),
        "{error}"
    );
    assert_eq!(f.partition.log_end_offset(), 0);
    // acks=1 does not wait for the ISR, so Kafka takes it.
    let info = f.partition.append_as_leader(&batch(1), 1, NOW).unwrap();
    assert_eq!(info.first_offset, 0);
    // With the second replica in sync, acks=all is taken too.
    f.partition
        .apply(&placement(LOCAL, 0, &[LOCAL, 2], &[LOCAL, 2]));
    assert!(f.partition.append_as_leader(&batch(1), -1, NOW).is_ok());
}

#[test]
fn a_sole_leader_moves_the_high_watermark_to_its_log_end() {
    let f = fixture();
    f.partition.apply(&placement(LOCAL, 3, &[LOCAL], &[LOCAL]));
    let mut changes = f.partition.watch_high_watermark();
    let info = append(&f.partition, 2).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 1));
    assert_eq!(f.partition.high_watermark(), 2);
    assert_eq!(f.partition.last_stable_offset(), 2);
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), 2);
    let state = f.partition.state();
    assert_eq!((state.role, state.leader_epoch), (Role::Leader, 3));
    assert_eq!(
        f.manager
            .get(&f.partition.topic_partition)
            .unwrap()
            .lock()
            .latest_epoch(),
        Some(3)
    );
}

#[test]
fn a_follower_refuses_clients_and_keeps_its_log() {
    let f = fixture();
    f.partition
        .apply(&placement(LOCAL, 0, &[LOCAL, 2], &[LOCAL, 2]));
    f.partition
        .apply(&placement(2, 1, &[LOCAL, 2], &[LOCAL, 2]));
    let state = f.partition.state();
    assert_eq!(
        (state.role, state.leader, state.leader_epoch),
        (Role::Follower, 2, 1)
    );
    let refused = append(&f.partition, 1).unwrap_err();
    assert_eq!(refused.kafka_error_code(), 6);
    let check = f.partition.check_leader_for_clients().unwrap_err();
    assert_eq!(check.kafka_error_code(), 6);
    assert_eq!(f.partition.log_end_offset(), 0);

    f.partition
        .apply(&placement(LOCAL, 2, &[LOCAL, 2], &[LOCAL]));
    assert!(f.partition.is_leader());
    assert_eq!(append(&f.partition, 1).unwrap().first_offset, 0);
}

#[test]
fn a_deleted_partition_refuses_every_append() {
    let f = fixture();
    f.partition.apply(&placement(LOCAL, 0, &[LOCAL], &[LOCAL]));
    f.partition.mark_deleted();
    assert_eq!(append(&f.partition, 1).unwrap_err().kafka_error_code(), 3);
    assert_eq!(f.partition.state().role, Role::Deleted);
}

#[test]
fn a_new_leader_epoch_forgets_what_followers_had_fetched() {
    let f = fixture();
    f.partition
        .apply(&placement(LOCAL, 0, &[LOCAL, 2], &[LOCAL, 2]));
    let fetch = FollowerFetch {
        replica_id: 2,
        fetch_offset: 0,
        log_start_offset: 0,
        current_leader_epoch: 0,
        last_fetched_epoch: -1,
        max_bytes: 1024,
        min_one_batch: true,
    };
    f.partition.fetch_for_follower(&fetch, NOW).unwrap();
    let fetched = |p: &Partition| p.state().followers[&2].log_end_offset;
    assert_eq!(fetched(&f.partition), 0);
    f.partition
        .apply(&placement(LOCAL, 0, &[LOCAL, 2], &[LOCAL, 2]));
    assert_eq!(fetched(&f.partition), 0, "same epoch keeps it");
    f.partition
        .apply(&placement(LOCAL, 1, &[LOCAL, 2], &[LOCAL, 2]));
    assert_eq!(fetched(&f.partition), -1);
}

#[test]
fn a_partition_in_an_offline_log_dir_answers_kafka_storage_error() {
    let f = fixture();
    f.partition.apply(&placement(LOCAL, 0, &[LOCAL], &[LOCAL]));
    let dir = f.partition.log_dir().to_path_buf();
    f.manager
        .failure_channel()
        .maybe_add_offline_log_dir(&dir, &"disk full");
    assert_eq!(append(&f.partition, 1).unwrap_err().kafka_error_code(), 56);
    let check = f.partition.check_leader_for_clients().unwrap_err();
    assert_eq!(check.kafka_error_code(), 56);
}

#[test]
fn delete_records_moves_the_leaders_low_watermark_and_a_follower_refuses() {
    let f = fixture();
    f.partition.apply(&placement(LOCAL, 1, &[LOCAL], &[LOCAL]));
    append(&f.partition, 5).unwrap();
    assert_eq!(f.partition.delete_records_on_leader(2).unwrap(), 2);
    assert_eq!(f.partition.log_start_offset(), 2);
    assert_eq!(f.partition.delete_records_on_leader(-1).unwrap(), 5);
    let beyond = f.partition.delete_records_on_leader(6).unwrap_err();
    assert_eq!(beyond.kafka_error_code(), 1);
    f.partition
        .apply(&placement(2, 2, &[LOCAL, 2], &[LOCAL, 2]));
    let follower = f.partition.delete_records_on_leader(5).unwrap_err();
    assert_eq!(follower.kafka_error_code(), 6);
}

/// A transactional producer's first batch (sequence 0) at epoch 0.
fn transactional_batch(producer_id: i64) -> Vec<u8> {
    let records = [(None, Some(&b"v"[..]))];
    let mut batch = krust_storage::transactional_coordinator_batch(producer_id, 0, &records, NOW);
    batch[53..57].copy_from_slice(&0i32.to_be_bytes());
    let crc = krust_storage::batch::compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn a_batch_verified_before_its_transaction_ended_is_refused() {
    let f = fixture();
    f.partition.apply(&placement(LOCAL, 0, &[LOCAL], &[LOCAL]));
    // Verified, then the transaction's marker arrives before the batch is appended.
    let guard = f.partition.start_transaction_verification(7, 0).unwrap();
    f.partition.end_transaction_verification(7);
    let late = f
        .partition
        .append_verified(&transactional_batch(7), -1, NOW, guard)
        .unwrap_err();
    assert_eq!(
        late.kafka_error_code(),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(f.partition.log_end_offset(), 0);
    // Verified and appended in time: the transaction is open, nothing more to verify.
    let guard = f.partition.start_transaction_verification(7, 0).unwrap();
    f.partition
        .append_verified(&transactional_batch(7), -1, NOW, guard)
        .unwrap();
    assert!(f.partition.start_transaction_verification(7, 0).is_none());
}
