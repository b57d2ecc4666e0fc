//! A leader's follower fetches, high watermark and ISR changes, and the follower side, with a
//! fake clock (every call takes its time).

use kafka_protocol::error::ResponseError;
use krust_storage::{LogConfig, LogManager, SharedLog, TopicPartition};
use tempfile::TempDir;
use uuid::Uuid;

use super::*;
use crate::metadata::metadata_cache::PartitionMetadata;
use crate::partition::{FetchIsolation, Transition};
use crate::replica::replica_fetcher::truncate_on_diverging_epoch;

const NOW: i64 = 1_700_000_000_000;
const LAG_MS: i64 = 30_000;

pub(crate) struct Replica {
    _dir: TempDir,
    pub manager: LogManager,
    pub partition: Partition,
}

pub(crate) fn replica(id: i32, config: LogConfig) -> Replica {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None, config).unwrap();
    let failures = manager.failure_channel().clone();
    let partition = Partition::new(tp, Uuid::nil(), id, LAG_MS, log, failures);
    Replica {
        _dir: dir,
        manager,
        partition,
    }
}

impl Replica {
    fn log(&self) -> SharedLog {
        self.partition.log.clone()
    }

    /// Every batch of the log, as stored.
    fn bytes(&self) -> Vec<u8> {
        let log = self.log();
        let log = log.lock();
        log.read(0, usize::MAX, log.log_end_offset(), true)
            .unwrap()
            .records
            .read_bytes()
            .unwrap()
            .to_vec()
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

fn produce(partition: &Partition, values: &[&str]) {
    let records: Vec<(Option<bytes::Bytes>, Option<bytes::Bytes>)> = values
        .iter()
        .map(|v| (None, Some(bytes::Bytes::from(v.to_string()))))
        .collect();
    let batch = crate::broker::encode_batch(&records, NOW).unwrap();
    partition.append_as_leader(&batch, 1, NOW).unwrap();
}

fn fetch(replica_id: i32, fetch_offset: i64, last_fetched_epoch: i32) -> FollowerFetch {
    FollowerFetch {
        replica_id,
        fetch_offset,
        log_start_offset: 0,
        current_leader_epoch: -1,
        last_fetched_epoch,
        max_bytes: usize::MAX,
        min_one_batch: true,
    }
}

/// One round of the replica fetcher for `follower` (broker `follower_id`) against `leader`
/// at `leader_epoch`, as the fetcher thread applies a Fetch response.
fn replicate_once(leader: &Partition, follower: &Partition, follower_id: i32, now_ms: i64) {
    let (last_epoch, log_end) = follower.fetch_position();
    let epoch = leader.leader_epoch();
    let read = leader
        .fetch_for_follower(
            &fetch(follower_id, log_end, last_epoch.unwrap_or(-1)),
            now_ms,
        )
        .unwrap();
    match read.diverging_epoch {
        Some((diverged, end_offset)) => {
            truncate_on_diverging_epoch(follower, epoch, diverged, end_offset).unwrap()
        }
        None => {
            let bytes = read.records.read_bytes().unwrap();
            let offsets = LeaderOffsets {
                high_watermark: read.high_watermark,
                log_start_offset: read.log_start_offset,
            };
            follower
                .append_as_follower(epoch, &bytes, offsets, now_ms)
                .unwrap();
        }
    }
}

/// Replicates until the follower has everything (a bounded number of rounds).
fn catch_up(leader: &Partition, follower: &Partition, follower_id: i32) {
    for _ in 0..10 {
        replicate_once(leader, follower, follower_id, NOW);
        if follower.log_end_offset() == leader.log_end_offset()
            && follower.high_watermark() == leader.log_end_offset()
        {
            return;
        }
    }
    panic!("the follower did not catch up");
}

#[test]
fn a_follower_fetch_reads_past_the_high_watermark_and_moves_it() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 0, &[1, 2, 3], &[1, 2]), NOW);
    produce(p, &["a", "b", "c"]);
    assert_eq!(p.high_watermark(), 0, "replica 2 has fetched nothing yet");
    assert!(p
        .read(0, usize::MAX, true, FetchIsolation::HighWatermark)
        .unwrap()
        .data
        .records
        .is_empty());
    let read = p.fetch_for_follower(&fetch(2, 0, -1), NOW).unwrap();
    assert_eq!(
        read.records.len(),
        leader.bytes().len(),
        "up to the log end"
    );
    // Replica 3 is out of the ISR and not caught up: it does not hold the watermark.
    p.fetch_for_follower(&fetch(2, 3, 0), NOW).unwrap();
    assert_eq!(p.high_watermark(), 3);
    p.fetch_for_follower(&fetch(2, 1, 0), NOW).unwrap();
    assert_eq!(p.high_watermark(), 3, "a high watermark never goes back");
    let unknown = p.fetch_for_follower(&fetch(9, 0, -1), NOW).unwrap_err();
    assert_eq!(unknown.kafka_error_code(), 6);
}

#[test]
fn a_follower_with_a_stale_or_newer_leader_epoch_is_fenced_or_told_to_wait() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 5, &[1, 2], &[1, 2]), NOW);
    let at_epoch = |epoch| FollowerFetch {
        current_leader_epoch: epoch,
        ..fetch(2, 0, -1)
    };
    let code = |epoch| {
        p.fetch_for_follower(&at_epoch(epoch), NOW)
            .unwrap_err()
            .kafka_error_code()
    };
    assert_eq!(code(4), ResponseError::FencedLeaderEpoch.code());
    assert_eq!(code(6), ResponseError::UnknownLeaderEpoch.code());
    assert!(p.fetch_for_follower(&at_epoch(5), NOW).is_ok());
}

#[test]
fn a_diverging_epoch_tells_the_follower_where_its_epoch_ended_on_the_leader() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(p, &["a", "b", "c"]);
    p.apply_at(&placement(1, 2, &[1, 2], &[1, 2]), NOW);
    produce(p, &["d", "e"]);
    let diverging = |offset, epoch| {
        p.fetch_for_follower(&fetch(2, offset, epoch), NOW)
            .unwrap()
            .diverging_epoch
    };
    assert_eq!(diverging(4, 1), Some((0, 3)), "epoch 1 never existed here");
    assert_eq!(diverging(4, 0), Some((0, 3)), "epoch 0 ended at 3");
    assert_eq!(diverging(3, 0), None);
    assert_eq!(diverging(5, 2), None);
    let unknown = p.fetch_for_follower(&fetch(2, 5, 7), NOW).unwrap_err();
    assert_eq!(unknown.kafka_error_code(), 1, "OFFSET_OUT_OF_RANGE");
}

#[test]
fn a_caught_up_follower_joins_the_isr_through_a_pending_change() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 1, &[1, 2, 3], &[1, 2]), NOW);
    produce(p, &["a", "b"]);
    p.fetch_for_follower(&fetch(2, 2, 1), NOW).unwrap();
    assert_eq!(p.high_watermark(), 2);
    produce(p, &["c"]);
    // Replica 3 reaches the high watermark (and this epoch's start): it may join.
    let change = p
        .fetch_for_follower(&fetch(3, 2, 1), NOW)
        .unwrap()
        .isr_change
        .expect("an ISR expansion");
    assert_eq!(change.new_isr, vec![1, 2, 3]);
    assert_eq!(change.partition_epoch, 1);
    // While it is pending, replica 3 counts for the high watermark (the maximal ISR), and
    // no other change is proposed.
    p.fetch_for_follower(&fetch(2, 3, 1), NOW).unwrap();
    assert_eq!(p.high_watermark(), 2, "replica 3 holds it at 2");
    assert!(p.maybe_shrink_isr(NOW + 10 * LAG_MS).is_none());
    p.handle_alter_partition_result(
        &change,
        AlterPartitionResult::Committed {
            leader_epoch: 1,
            isr: vec![1, 2, 3],
            partition_epoch: 2,
        },
    );
    let state = p.state();
    assert_eq!(
        (state.isr.clone(), state.partition_epoch),
        (vec![1, 2, 3], 2)
    );
    assert!(state.pending_isr.is_none());
}

#[test]
fn a_lagging_follower_leaves_the_isr_and_acks_all_then_fails_min_insync_replicas() {
    let mut config = LogConfig::default();
    config.apply_override("min.insync.replicas", "2").unwrap();
    let leader = replica(1, config);
    let p = &leader.partition;
    p.apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(p, &["a"]);
    p.fetch_for_follower(&fetch(2, 1, 0), NOW + 1_000).unwrap();
    produce(p, &["b"]);
    assert_eq!(p.check_enough_replicas_reach_offset(2), None, "waiting");
    assert!(
        p.maybe_shrink_isr(NOW + 1_000 + LAG_MS).is_none(),
        "within the lag"
    );
    let change = p.maybe_shrink_isr(NOW + 1_001 + LAG_MS).expect("a shrink");
    assert_eq!(change.new_isr, vec![1]);
    assert_eq!(
        p.high_watermark(),
        1,
        "the pending shrink still counts replica 2"
    );
    p.handle_alter_partition_result(
        &change,
        AlterPartitionResult::Committed {
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 1,
        },
    );
    assert_eq!(p.high_watermark(), 2);
    assert_eq!(
        p.check_enough_replicas_reach_offset(2),
        Some(Err(ResponseError::NotEnoughReplicasAfterAppend))
    );
    let refused = p.append_as_leader(&[], -1, NOW).unwrap_err();
    assert_eq!(
        refused.kafka_error_code(),
        ResponseError::NotEnoughReplicas.code()
    );
}

#[test]
fn refused_isr_changes_are_dropped_or_wait_for_metadata_as_kafka_does() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    let shrink = p.maybe_shrink_isr(NOW + 2 * LAG_MS).unwrap();
    p.handle_alter_partition_result(
        &shrink,
        AlterPartitionResult::Refused(ResponseError::OperationNotAttempted),
    );
    assert!(p.state().pending_isr.is_none(), "nothing changed: drop it");

    let shrink = p.maybe_shrink_isr(NOW + 2 * LAG_MS).unwrap();
    for error in [
        ResponseError::InvalidUpdateVersion,
        ResponseError::FencedLeaderEpoch,
        ResponseError::NewLeaderElected,
    ] {
        p.handle_alter_partition_result(&shrink, AlterPartitionResult::Refused(error));
        assert!(p.is_pending(&shrink), "{error:?} waits for the metadata");
    }
    // The metadata brings the partition's state: the pending change is settled by it, and
    // a late answer to it is ignored.
    p.apply_at(&placement(1, 1, &[1, 2], &[1]), NOW);
    assert!(p.state().pending_isr.is_none());
    p.handle_alter_partition_result(
        &shrink,
        AlterPartitionResult::Committed {
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 9,
        },
    );
    assert_eq!(p.state().isr, vec![1]);
}

#[test]
fn acks_all_waiting_on_a_leader_that_becomes_follower_fails_with_not_leader() {
    let leader = replica(1, LogConfig::default());
    let p = &leader.partition;
    p.apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(p, &["a"]);
    assert_eq!(p.check_enough_replicas_reach_offset(1), None);
    assert_eq!(
        p.apply_at(&placement(2, 1, &[1, 2], &[1, 2]), NOW),
        Transition::NewLeader
    );
    assert_eq!(
        p.check_enough_replicas_reach_offset(1),
        Some(Err(ResponseError::NotLeaderOrFollower))
    );
}

/// KIP-101's first scenario: a follower that truncated to its high watermark on restart
/// lost a committed record when it then became leader. With leader epochs it keeps it.
#[test]
fn kip_101_a_restarted_follower_keeps_committed_records_it_has_beyond_its_high_watermark() {
    let a = replica(1, LogConfig::default());
    let b = replica(2, LogConfig::default());
    a.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    b.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(&a.partition, &["m1"]);
    produce(&a.partition, &["m2"]);
    replicate_once(&a.partition, &b.partition, 2, NOW);
    // A knows both are committed once B fetches again; B's high watermark lags behind.
    a.partition
        .fetch_for_follower(&fetch(2, 2, 0), NOW)
        .unwrap();
    assert_eq!(a.partition.high_watermark(), 2);
    assert!(b.partition.high_watermark() < 2);

    // B restarts (its log reopens), A fails, B leads epoch 1 and A follows.
    b.log().lock().close().unwrap();
    let b = Replica {
        partition: reopen(&b.manager, 2),
        ..b
    };
    b.partition.apply_at(&placement(2, 1, &[1, 2], &[2]), NOW);
    a.partition.apply_at(&placement(2, 1, &[1, 2], &[2]), NOW);
    assert_eq!(b.partition.log_end_offset(), 2, "m2 was not truncated");
    catch_up(&b.partition, &a.partition, 1);
    assert_eq!(a.bytes(), b.bytes());
    assert_eq!(a.partition.log_end_offset(), 2, "m2 survives on both");
}

/// KIP-101's second scenario: two replicas with different records at the same offset after
/// both crashed. The follower truncates to where its epoch ended on the new leader.
#[test]
fn kip_101_a_diverged_follower_truncates_to_the_leaders_epoch_end_and_converges() {
    let a = replica(1, LogConfig::default());
    let b = replica(2, LogConfig::default());
    a.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    b.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(&a.partition, &["m1"]);
    replicate_once(&a.partition, &b.partition, 2, NOW);
    // m2 reaches only A; then both crash and B comes back first as leader of epoch 1.
    produce(&a.partition, &["m2"]);
    b.partition.apply_at(&placement(2, 1, &[1, 2], &[2]), NOW);
    produce(&b.partition, &["m3"]);
    a.partition.apply_at(&placement(2, 1, &[1, 2], &[2]), NOW);
    assert_eq!(a.partition.log_end_offset(), 2);
    assert_ne!(a.bytes(), b.bytes(), "offset 1 differs");

    catch_up(&b.partition, &a.partition, 1);
    assert_eq!(a.bytes(), b.bytes(), "A dropped m2 and took m3");
    let log = a.log();
    let epochs: Vec<(i32, i64)> = log
        .lock()
        .leader_epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(0, 0), (1, 1)]);
}

/// A follower's high watermark is the leader's, bounded by its own log end.
#[test]
fn a_follower_takes_the_leaders_high_watermark_up_to_its_own_log_end() {
    let a = replica(1, LogConfig::default());
    let b = replica(2, LogConfig::default());
    a.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    b.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(&a.partition, &["m1", "m2"]);
    catch_up(&a.partition, &b.partition, 2);
    assert_eq!(b.partition.high_watermark(), 2);
    let ahead = LeaderOffsets {
        high_watermark: 5,
        log_start_offset: 0,
    };
    let stale = b.partition.append_as_follower(0, &[], ahead, NOW).unwrap();
    assert_eq!(stale.record_count, 0);
    assert_eq!(b.partition.high_watermark(), 2, "never past its log end");
    let fenced = b
        .partition
        .append_as_follower(3, &[], ahead, NOW)
        .unwrap_err();
    assert_eq!(
        fenced.kafka_error_code(),
        ResponseError::FencedLeaderEpoch.code()
    );
}

fn reopen(manager: &LogManager, id: i32) -> Partition {
    let tp = TopicPartition::new("t", 0);
    let dir = manager.get(&tp).unwrap().lock().dir().to_path_buf();
    let log = krust_storage::Log::open(
        &dir,
        tp.clone(),
        None,
        LogConfig::default(),
        krust_storage::LoadParams::default(),
        NOW,
    )
    .unwrap();
    let log: SharedLog = std::sync::Arc::new(parking_lot::Mutex::new(log));
    Partition::new(
        tp,
        Uuid::nil(),
        id,
        LAG_MS,
        log,
        manager.failure_channel().clone(),
    )
}

/// DeleteRecords on the leader reaches the follower with its next fetch.
#[test]
fn a_follower_takes_the_leaders_log_start_offset() {
    let a = replica(1, LogConfig::default());
    let b = replica(2, LogConfig::default());
    a.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    b.partition
        .apply_at(&placement(1, 0, &[1, 2], &[1, 2]), NOW);
    produce(&a.partition, &["m1", "m2", "m3"]);
    catch_up(&a.partition, &b.partition, 2);
    assert_eq!(a.partition.delete_records_on_leader(2).unwrap(), 2);
    replicate_once(&a.partition, &b.partition, 2, NOW);
    assert_eq!(b.partition.log_start_offset(), 2);
}
