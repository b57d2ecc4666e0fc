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
    AppendError, AppendOrigin, DeleteRecordsError, FetchDataInfo, Log, LogAppendInfo,
    LogDirFailureChannel, ProducerStateEntry, ReadError, SharedLog, StorageError,
    TimestampAndOffset, TopicPartition,
};
use parking_lot::RwLock;
use tokio::sync::watch;
use uuid::Uuid;

use crate::metadata_cache::PartitionMetadata;
use crate::metrics::{BrokerTopicMetrics, TopicMetrics};

/// What this broker's replica of a partition does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Takes produce and client fetches; moves the high watermark.
    Leader,
    /// Copies the leader (from issue 12 on); clients get NOT_LEADER_OR_FOLLOWER.
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
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    DeleteRecords(#[from] DeleteRecordsError),
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
            Self::Append(error) => error.kafka_error_code(),
            Self::DeleteRecords(error) => error.kafka_error_code(),
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
    pub isr: Vec<i32>,
    /// Leader only: the log end offset each other replica has fetched up to (-1: unknown).
    pub remote_log_end_offsets: HashMap<i32, i64>,
}

/// A partition this broker hosts a replica of.
pub struct Partition {
    pub topic_partition: TopicPartition,
    pub topic_id: Uuid,
    local_broker_id: i32,
    log: SharedLog,
    log_dir: PathBuf,
    failures: Arc<LogDirFailureChannel>,
    /// Read for appends and queries, written by transitions (Kafka's leaderIsrUpdateLock).
    state: RwLock<PartitionState>,
    high_watermark_changes: watch::Sender<i64>,
    /// Its topic's BrokerTopicMetrics handles, looked up on first use.
    topic_metrics: OnceLock<TopicMetrics>,
}

impl Partition {
    /// A replica over `log`, a follower of no one until the first transition.
    pub fn new(
        topic_partition: TopicPartition,
        topic_id: Uuid,
        local_broker_id: i32,
        log: SharedLog,
        failures: Arc<LogDirFailureChannel>,
    ) -> Self {
        let log_dir = log_dir_of(&log);
        let high_watermark = log.lock().high_watermark();
        Partition {
            topic_partition,
            topic_id,
            local_broker_id,
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
                remote_log_end_offsets: HashMap::new(),
            }),
            high_watermark_changes: watch::Sender::new(high_watermark),
            topic_metrics: OnceLock::new(),
        }
    }

    /// Takes the role `placement` gives this broker: Kafka's makeLeader or makeFollower.
    pub fn apply(&self, placement: &PartitionMetadata) {
        if placement.leader == self.local_broker_id {
            self.make_leader(placement);
        } else {
            self.make_follower(placement);
        }
    }

    /// Becomes (or stays) leader with the epochs, replicas and ISR of `placement`. A new leader
    /// epoch forgets what other replicas had fetched, as they must fetch from this leader.
    pub fn make_leader(&self, placement: &PartitionMetadata) {
        let mut state = self.state.write();
        let new_epoch = state.role != Role::Leader || state.leader_epoch != placement.leader_epoch;
        let mut remote = if new_epoch {
            HashMap::new()
        } else {
            std::mem::take(&mut state.remote_log_end_offsets)
        };
        remote.retain(|id, _| placement.replicas.contains(id));
        for &id in &placement.replicas {
            if id != self.local_broker_id {
                remote.entry(id).or_insert(-1);
            }
        }
        *state = PartitionState {
            role: Role::Leader,
            leader: self.local_broker_id,
            leader_epoch: placement.leader_epoch,
            partition_epoch: placement.partition_epoch,
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            remote_log_end_offsets: remote,
        };
        self.maybe_increment_high_watermark(&state, &mut self.log.lock());
    }

    /// Becomes (or stays) a follower of `placement.leader`.
    pub fn make_follower(&self, placement: &PartitionMetadata) {
        *self.state.write() = PartitionState {
            role: Role::Follower,
            leader: placement.leader,
            leader_epoch: placement.leader_epoch,
            partition_epoch: placement.partition_epoch,
            replicas: placement.replicas.clone(),
            isr: placement.isr.clone(),
            remote_log_end_offsets: HashMap::new(),
        };
    }

    /// The partition left this broker (topic deleted or replica moved): requests that still
    /// hold it are refused.
    pub fn mark_deleted(&self) {
        self.state.write().role = Role::Deleted;
    }

    /// Leader only: `replica` has fetched up to `log_end_offset` (Kafka's
    /// updateFollowerFetchState); the high watermark may move.
    pub fn update_follower_fetch_state(
        &self,
        replica: i32,
        log_end_offset: i64,
    ) -> Result<(), PartitionError> {
        let mut state = self.state.write();
        Self::check_leader(&state)?;
        match state.remote_log_end_offsets.get_mut(&replica) {
            Some(offset) => *offset = log_end_offset,
            None => return Err(PartitionError::NotLeaderOrFollower),
        }
        self.maybe_increment_high_watermark(&state, &mut self.log.lock());
        Ok(())
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
        self.maybe_increment_high_watermark(&state, &mut log);
        Ok(info)
    }

    /// Kafka's maybeIncrementLeaderHW: the smallest log end offset of the ISR (this leader's
    /// own included); a replica whose offset is unknown holds it back.
    fn maybe_increment_high_watermark(&self, state: &PartitionState, log: &mut Log) {
        if state.role != Role::Leader {
            return;
        }
        let candidate = state
            .isr
            .iter()
            .filter(|id| **id != self.local_broker_id)
            .map(|id| state.remote_log_end_offsets.get(id).copied().unwrap_or(-1))
            .fold(log.log_end_offset(), i64::min);
        if log.maybe_increment_high_watermark(candidate) {
            self.high_watermark_changes
                .send_replace(log.high_watermark());
        }
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

    /// Reads whole batches from `offset`, up to the high watermark.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, ReadError> {
        // Plan under the lock, read the files without it.
        let plan = {
            let log = self.log.lock();
            log.read_plan(offset, log.high_watermark())?
        };
        plan.read(max_bytes, min_one_batch)
            .inspect_err(|error| self.on_read_error(error))
    }

    /// The first offset whose timestamp is at or after `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampAndOffset>, ReadError> {
        self.log
            .lock()
            .fetch_offset_by_timestamp(timestamp)
            .inspect_err(|error| self.on_read_error(error))
    }

    /// The record with the largest timestamp (ListOffsets -3, KIP-734).
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampAndOffset>, ReadError> {
        self.log
            .lock()
            .offset_of_max_timestamp()
            .inspect_err(|error| self.on_read_error(error))
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

    fn on_read_error(&self, error: &ReadError) {
        if let ReadError::Storage(cause) = error {
            self.failures
                .maybe_add_offline_log_dir(&self.log_dir, cause);
        }
    }
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
#[path = "partition_tests.rs"]
mod tests;
