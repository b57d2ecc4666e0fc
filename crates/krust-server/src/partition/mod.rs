//! `Partition`: one hosted replica as a state machine (Kafka's `Partition`).
//!
//! Its role (leader or follower), leader and partition epochs, replicas, ISR and, on the
//! leader, the log end offset each other replica has fetched, change together under one lock.
//! The high watermark and last stable offset are kept by the `Log` (as in Kafka's
//! UnifiedLog); the leader moves the high watermark to the smallest log end offset of the
//! ISR and tells waiting requests (`purgatory`) through a watch channel.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use kafka_protocol::error::ResponseError;
use krust_storage::{
    AppendError, AppendOrigin, DeleteRecordsError, LogAppendInfo, LogDirFailureChannel,
    ProducerStateEntry, ReadError, SharedLog, StorageError, TimestampAndOffset, TopicPartition,
};
use parking_lot::RwLock;
use tokio::sync::watch;
use uuid::Uuid;

use crate::clock::now_ms;
use crate::metadata::metadata_cache::PartitionMetadata;
use crate::metrics::{BrokerTopicMetrics, TopicMetrics};
use crate::partition::replica::ReplicaState;
use crate::partition::verification::VerificationGuards;
use isr_change::PendingIsrChange;

mod replication;
pub use replication::{FollowerFetch, FollowerRead, LeaderOffsets};
mod isolation;
pub use isolation::{ConsumerRead, FetchIsolation, LastFetchable};
pub mod isr_change;
pub mod replica;
pub mod verification;

/// What this broker's replica of a partition does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Takes produce and client fetches; moves the high watermark.
    Leader,
    /// Copies the leader (the replica fetcher); clients get NOT_LEADER_OR_FOLLOWER.
    Follower,
    /// Removed from the metadata; its log is being deleted.
    Deleted,
}

/// Why a partition refused a request.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("this broker is not the leader of the partition")]
    NotLeaderOrFollower,
    #[error("the partition was deleted")]
    Deleted,
    #[error("the partition's log dir is offline")]
    LogDirOffline,
    #[error("the request's leader epoch is older than the leader's")]
    FencedLeaderEpoch,
    #[error("the request's leader epoch is newer than the leader's")]
    UnknownLeaderEpoch,
    #[error(
        "the size of the current ISR {isr:?} is insufficient to satisfy the min.isr requirement \
         of {min_isr} for partition {topic_partition}"
    )]
    NotEnoughReplicas {
        isr: Vec<i32>,
        min_isr: i32,
        topic_partition: TopicPartition,
    },
    #[error(
        "producer {producer_id}: its transaction ended while its first batch here was verified"
    )]
    TransactionEnded { producer_id: i64 },
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    DeleteRecords(#[from] DeleteRecordsError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl PartitionError {
    /// The Kafka error code for the response.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            Self::NotLeaderOrFollower => ResponseError::NotLeaderOrFollower.code(),
            Self::Deleted => ResponseError::UnknownTopicOrPartition.code(),
            Self::LogDirOffline => ResponseError::KafkaStorageError.code(),
            Self::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch.code(),
            Self::UnknownLeaderEpoch => ResponseError::UnknownLeaderEpoch.code(),
            Self::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas.code(),
            Self::TransactionEnded { .. } => ResponseError::InvalidTxnState.code(),
            Self::Append(error) => error.kafka_error_code(),
            Self::DeleteRecords(error) => error.kafka_error_code(),
            Self::Read(error) => error.kafka_error_code(),
            Self::Storage(_) => ResponseError::KafkaStorageError.code(),
        }
    }
}

/// The state that changes together, under `Partition::state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    pub role: Role,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// The committed ISR (Kafka's `partitionState.isr`).
    pub isr: Vec<i32>,
    /// Leader only: an ISR change sent with AlterPartition and not yet committed (KIP-497).
    pub pending_isr: Option<PendingIsrChange>,
    /// Leader only: what each other replica has fetched (Kafka's `Replica`).
    pub followers: HashMap<i32, ReplicaState>,
    /// Leader only: the log end offset when this leader epoch began; a follower joins the
    /// ISR only once it has reached it.
    pub leader_epoch_start_offset: i64,
}

impl PartitionState {
    /// Kafka's `maximalIsr`: the committed ISR with any replica a pending change adds. The
    /// high watermark and acks=all count it, so a change in flight cannot lose a write.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending_isr {
            isr.extend(pending.new_isr.iter().filter(|id| !self.isr.contains(id)));
        }
        isr
    }
}

/// A partition this broker hosts a replica of.
pub struct Partition {
    pub topic_partition: TopicPartition,
    pub topic_id: Uuid,
    local_broker_id: i32,
    /// `replica.lag.time.max.ms`: how long a follower may lag before it leaves the ISR.
    replica_lag_time_max_ms: i64,
    log: SharedLog,
    log_dir: PathBuf,
    failures: Arc<LogDirFailureChannel>,
    /// Read for appends and queries, written by transitions (Kafka's leaderIsrUpdateLock).
    state: RwLock<PartitionState>,
    high_watermark_changes: watch::Sender<i64>,
    /// The log end offset: a follower's fetch waits on it, as the high watermark waits for
    /// the followers.
    log_end_changes: watch::Sender<i64>,
    /// Its topic's BrokerTopicMetrics handles, looked up on first use.
    topic_metrics: OnceLock<TopicMetrics>,
    /// KIP-890: the transactional producers whose first batch here is being verified.
    pub(crate) verification: VerificationGuards,
}

impl Partition {
    /// A replica over `log`, a follower of no one until the first transition.
    pub fn new(
        topic_partition: TopicPartition,
        topic_id: Uuid,
        local_broker_id: i32,
        replica_lag_time_max_ms: i64,
        log: SharedLog,
        failures: Arc<LogDirFailureChannel>,
    ) -> Self {
        let log_dir = log_dir_of(&log);
        let (high_watermark, log_end_offset) = {
            let log = log.lock();
            (log.high_watermark(), log.log_end_offset())
        };
        Partition {
            topic_partition,
            topic_id,
            local_broker_id,
            replica_lag_time_max_ms,
            log,
            log_dir,
            failures,
            state: RwLock::new(PartitionState {
                role: Role::Follower,
                leader: -1,
                leader_epoch: -1,
                partition_epoch: -1,
                replicas: Vec::new(),
                isr: Vec::new(),
                pending_isr: None,
                followers: HashMap::new(),
                leader_epoch_start_offset: -1,
            }),
            high_watermark_changes: watch::Sender::new(high_watermark),
            log_end_changes: watch::Sender::new(log_end_offset),
            topic_metrics: OnceLock::new(),
            verification: VerificationGuards::default(),
        }
    }

    /// Takes the role `placement` gives this broker: Kafka's makeLeader or makeFollower.
    /// Returns the transition the replica fetcher must follow.
    pub fn apply(&self, placement: &PartitionMetadata) -> Transition {
        self.apply_at(placement, now_ms())
    }

    /// `apply` at `now_ms` (followers in the ISR count as caught up from then).
    pub fn apply_at(&self, placement: &PartitionMetadata, now_ms: i64) -> Transition {
        if placement.leader == self.local_broker_id {
            self.make_leader(placement, now_ms);
            Transition::Leader
        } else if self.make_follower(placement) {
            Transition::NewLeader
        } else {
            Transition::Unchanged
        }
    }

    /// Becomes (or stays) leader with the epochs, replicas and ISR of `placement`; any
    /// pending ISR change is settled by it. A new leader epoch forgets what the followers had
    /// fetched, as they must fetch from this leader (Kafka's `resetReplicaState`).
    fn make_leader(&self, placement: &PartitionMetadata, now_ms: i64) {
        let mut state = self.state.write();
        let mut log = self.log.lock();
        let new_epoch = state.role != Role::Leader || state.leader_epoch != placement.leader_epoch;
        if !new_epoch && placement.partition_epoch < state.partition_epoch {
            // Older than an ISR change this leader already saw committed (Kafka skips it).
            return;
        }
        let mut followers = std::mem::take(&mut state.followers);
        followers.retain(|id, _| placement.replicas.contains(id));
        for &id in &placement.replicas {
            if id == self.local_broker_id {
                continue;
            }
            let in_sync = placement.isr.contains(&id);
            let follower = followers
                .entry(id)
                .or_insert_with(|| ReplicaState::unknown(now_ms, in_sync));
            if new_epoch {
                *follower = ReplicaState::unknown(now_ms, in_sync);
            } else {
                follower.last_caught_up_time_ms = if in_sync { now_ms } else { 0 };
            }
        }
        let leader_epoch_start_offset = if new_epoch {
            log.log_end_offset()
        } else {
            state.leader_epoch_start_offset
        };
        *state = PartitionState {
            role: Role::Leader,
            leader: self.local_broker_id,
            leader_epoch: placement.leader_epoch,
            partition_epoch: placement.partition_epoch,
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            pending_isr: None,
            followers,
            leader_epoch_start_offset,
        };
        self.maybe_increment_high_watermark(&state, &mut log, now_ms);
        self.notify_waiters();
    }

    /// Becomes (or stays) a follower of `placement.leader`; true when the leader or its epoch
    /// changed (the fetcher must fetch from it anew). Requests waiting on this replica as
    /// leader are woken to answer NOT_LEADER_OR_FOLLOWER.
    fn make_follower(&self, placement: &PartitionMetadata) -> bool {
        let mut state = self.state.write();
        let changed = state.role != Role::Follower
            || state.leader != placement.leader
            || state.leader_epoch != placement.leader_epoch;
        *state = PartitionState {
            role: Role::Follower,
            leader: placement.leader,
            leader_epoch: placement.leader_epoch,
            partition_epoch: placement.partition_epoch,
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            pending_isr: None,
            followers: HashMap::new(),
            leader_epoch_start_offset: -1,
        };
        drop(state);
        self.notify_waiters();
        changed
    }

    /// The partition left this broker (topic deleted or replica moved): requests that still
    /// hold it are refused.
    pub fn mark_deleted(&self) {
        self.state.write().role = Role::Deleted;
        self.notify_waiters();
    }

    /// Wakes the requests watching this partition (DelayedProduce, DelayedFetch) to check
    /// it again: its role or ISR changed though its high watermark may not have.
    fn notify_waiters(&self) {
        self.high_watermark_changes.send_modify(|_| {});
    }

    /// A copy of the state, for tests and diagnostics.
    pub fn state(&self) -> PartitionState {
        self.state.read().clone()
    }

    pub fn is_leader(&self) -> bool {
        self.state.read().role == Role::Leader
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.read().leader_epoch
    }

    /// Whether this replica may answer clients: leader, not deleted, its log dir online.
    pub fn check_leader_for_clients(&self) -> Result<(), PartitionError> {
        self.check_online()?;
        Self::check_leader(&self.state.read())
    }

    fn check_leader(state: &PartitionState) -> Result<(), PartitionError> {
        match state.role {
            Role::Leader => Ok(()),
            Role::Follower => Err(PartitionError::NotLeaderOrFollower),
            Role::Deleted => Err(PartitionError::Deleted),
        }
    }

    fn check_online(&self) -> Result<(), PartitionError> {
        if self.failures.is_offline(&self.log_dir) {
            return Err(PartitionError::LogDirOffline);
        }
        Ok(())
    }

    /// The log dir holding this partition's log.
    pub fn log_dir(&self) -> &std::path::Path {
        &self.log_dir
    }

    pub fn high_watermark(&self) -> i64 {
        self.log.lock().high_watermark()
    }

    pub fn last_stable_offset(&self) -> i64 {
        self.log.lock().last_stable_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.lock().log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.lock().log_end_offset()
    }

    /// The handles of this partition's topic in `metrics`, looked up once per partition.
    pub fn topic_metrics(&self, metrics: &BrokerTopicMetrics) -> &TopicMetrics {
        self.topic_metrics
            .get_or_init(|| metrics.topic(&self.topic_partition.topic))
    }

    /// A receiver that sees every log end change from now on (leader appends).
    pub fn watch_log_end(&self) -> watch::Receiver<i64> {
        self.log_end_changes.subscribe()
    }

    /// A receiver that sees every high-watermark change from now on.
    pub fn watch_high_watermark(&self) -> watch::Receiver<i64> {
        self.high_watermark_changes.subscribe()
    }

    /// Appends a producer's record set as leader; `required_acks` is the request's acks.
    pub fn append_as_leader(
        &self,
        records: &[u8],
        required_acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        self.append_records_to_leader(AppendOrigin::Client, records, required_acks, now_ms)
    }

    /// Appends as leader for `origin`, then moves the high watermark if the ISR allows. An
    /// acks=all append to a partition with fewer in-sync replicas than `min.insync.replicas` is
    /// refused before anything is written (Kafka's appendRecordsToLeader).
    pub fn append_records_to_leader(
        &self,
        origin: AppendOrigin,
        records: &[u8],
        required_acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        self.check_online()?;
        let state = self.state.read();
        Self::check_leader(&state)?;
        let mut log = self.log.lock();
        let min_isr = log.config().min_insync_replicas;
        if required_acks == -1 && state.isr.len() < usize::try_from(min_isr).unwrap_or(0) {
            return Err(PartitionError::NotEnoughReplicas {
                isr: state.isr.clone(),
                min_isr,
                topic_partition: self.topic_partition.clone(),
            });
        }
        let info = log
            .append_as_leader_from(origin, records, state.leader_epoch, now_ms)
            .inspect_err(|error| {
                if let AppendError::Storage(cause) = error {
                    self.failures
                        .maybe_add_offline_log_dir(&self.log_dir, cause);
                }
            })?;
        self.maybe_increment_high_watermark(&state, &mut log, now_ms);
        self.log_end_changes.send_replace(log.log_end_offset());
        Ok(info)
    }

    /// DeleteRecords on the leader (Kafka's `deleteRecordsOnLeader`): moves the log start
    /// offset up to `offset` (-1: the high watermark) and returns the low watermark, the
    /// smallest log start offset of the replicas, which with no followers yet is this log's.
    pub fn delete_records_on_leader(&self, offset: i64) -> Result<i64, PartitionError> {
        self.check_online()?;
        let state = self.state.read();
        Self::check_leader(&state)?;
        let low_watermark = self
            .log
            .lock()
            .delete_records(offset)
            .inspect_err(|error| {
                if let DeleteRecordsError::Storage(StorageError::Io { source, .. }) = error {
                    self.failures
                        .maybe_add_offline_log_dir(&self.log_dir, source);
                }
            })?;
        Ok(low_watermark)
    }

    /// Reads whole batches from `offset` for a consumer, up to the high watermark, or up to
    /// the last stable offset for `FetchIsolation::TxnCommitted` (read_committed), which also
    /// gets the aborted transactions of the range read (KIP-98).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: FetchIsolation,
    ) -> Result<ConsumerRead, ReadError> {
        // Plan under the lock, read the files without it.
        let plan = {
            let log = self.log.lock();
            log.read_plan(offset, LastFetchable::Consumer(isolation).offset_in(&log))?
        };
        let data = plan
            .read(max_bytes, min_one_batch)
            .inspect_err(|error| self.on_read_error(error))?;
        let aborted_transactions = match isolation {
            FetchIsolation::HighWatermark => None,
            FetchIsolation::TxnCommitted if data.first_batch_offset.is_none() => Some(Vec::new()),
            FetchIsolation::TxnCommitted => Some(
                self.log
                    .lock()
                    .collect_aborted_transactions(offset, data.next_offset),
            ),
        };
        Ok(ConsumerRead {
            data,
            aborted_transactions,
        })
    }

    /// The first offset whose timestamp is at or after `timestamp`, with that timestamp;
    /// `None` unless it is below `last_fetchable` (Kafka's fetchOffsetForTimestamp).
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
        last_fetchable: LastFetchable,
    ) -> Result<Option<TimestampAndOffset>, ReadError> {
        let log = self.log.lock();
        let found = log
            .fetch_offset_by_timestamp(timestamp)
            .inspect_err(|error| self.on_read_error(error))?;
        Ok(found.filter(|f| f.offset < last_fetchable.offset_in(&log)))
    }

    /// The record with the largest timestamp (ListOffsets -3, KIP-734), if below
    /// `last_fetchable`.
    pub fn offset_of_max_timestamp(
        &self,
        last_fetchable: LastFetchable,
    ) -> Result<Option<TimestampAndOffset>, ReadError> {
        let log = self.log.lock();
        let found = log
            .offset_of_max_timestamp()
            .inspect_err(|error| self.on_read_error(error))?;
        Ok(found.filter(|f| f.offset < last_fetchable.offset_in(&log)))
    }

    /// The offset `last_fetchable` stands for now (ListOffsets LATEST).
    pub fn last_fetchable_offset(&self, last_fetchable: LastFetchable) -> i64 {
        last_fetchable.offset_in(&self.log.lock())
    }

    /// Kafka's lastOffsetForLeaderEpoch (KIP-101, KIP-320): the largest epoch at or below
    /// `leader_epoch` and the offset where the next one began, or (-1, -1) if unknown. A
    /// `current_leader_epoch` (-1: none) other than the leader's is fenced or unknown.
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> Result<(i32, i64), PartitionError> {
        self.check_online()?;
        let state = self.state.read();
        check_current_leader_epoch(current_leader_epoch, state.leader_epoch)?;
        Self::check_leader(&state)?;
        Ok(self.log.lock().end_offset_for_epoch(leader_epoch))
    }

    /// The producers the log remembers, by producer id (DescribeProducers, KIP-664).
    pub fn active_producers(&self) -> Result<Vec<(i64, ProducerStateEntry)>, PartitionError> {
        self.check_online()?;
        if self.state.read().role == Role::Deleted {
            return Err(PartitionError::Deleted);
        }
        let log = self.log.lock();
        let mut producers: Vec<(i64, ProducerStateEntry)> = log
            .producer_state()
            .producers()
            .iter()
            .map(|(id, entry)| (*id, entry.clone()))
            .collect();
        producers.sort_by_key(|(id, _)| *id);
        Ok(producers)
    }

    /// Whether producer `producer_id` at `producer_epoch` has a transaction open on this
    /// partition (KIP-890: only a batch that would start one is verified with the coordinator).
    pub fn has_ongoing_transaction(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.log
            .lock()
            .producer_state()
            .producers()
            .get(&producer_id)
            .is_some_and(|entry| {
                entry.producer_epoch == producer_epoch && entry.current_txn_first_offset >= 0
            })
    }

    fn on_read_error(&self, error: &ReadError) {
        if let ReadError::Storage(cause) = error {
            self.failures
                .maybe_add_offline_log_dir(&self.log_dir, cause);
        }
    }
}

/// What a metadata change made of this replica, for the replica fetcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Leader: nothing to fetch.
    Leader,
    /// A follower of a new leader or leader epoch: fetch from it.
    NewLeader,
    /// Still a follower of the same leader and epoch.
    Unchanged,
}

/// KIP-320: a request that knows a newer leader epoch than `current` is ahead of this broker
/// (UNKNOWN_LEADER_EPOCH); one with an older epoch is fenced; -1 asks for no check.
pub fn check_current_leader_epoch(requested: i32, current: i32) -> Result<(), PartitionError> {
    if requested < 0 || requested == current {
        Ok(())
    } else if requested > current {
        Err(PartitionError::UnknownLeaderEpoch)
    } else {
        Err(PartitionError::FencedLeaderEpoch)
    }
}

/// The log dir holding a partition's log (the parent of its `<topic>-<partition>` dir).
pub(crate) fn log_dir_of(log: &SharedLog) -> PathBuf {
    let log = log.lock();
    log.dir().parent().unwrap_or(log.dir()).to_path_buf()
}

#[cfg(test)]
mod tests;
