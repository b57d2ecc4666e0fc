//! Replication in `Partition`: on a leader, follower fetches (KIP-320/KIP-595 divergence
//! checks), the followers' fetch state, the high watermark over the maximal ISR and ISR
//! changes (KIP-497); on a follower, appending and truncating what the fetcher brings.

use kafka_protocol::error::ResponseError;
use krust_storage::{FileSlice, Log, LogAppendInfo, ReadError};

use super::{check_current_leader_epoch, Partition, PartitionError, PartitionState, Role};
use crate::clock::now_ms;
use crate::partition::isr_change::{AlterPartitionResult, PendingIsrChange};

/// One partition of a follower's Fetch.
#[derive(Clone, Copy, Debug)]
pub struct FollowerFetch {
    pub replica_id: i32,
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    /// -1: no check.
    pub current_leader_epoch: i32,
    /// The epoch of the follower's last fetched batch (-1: none), KIP-320.
    pub last_fetched_epoch: i32,
    pub max_bytes: usize,
    pub min_one_batch: bool,
}

/// The leader's offsets a follower takes from a fetch answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderOffsets {
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// What a leader answers one partition of a follower's Fetch.
#[derive(Clone, Debug)]
pub struct FollowerRead {
    pub records: FileSlice,
    /// The follower's log diverged: (the largest leader epoch <= its last fetched epoch,
    /// where that epoch ends on the leader); it must truncate and fetch again.
    pub diverging_epoch: Option<(i32, i64)>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// An ISR expansion this fetch calls for, to send to the controller.
    pub isr_change: Option<PendingIsrChange>,
    /// Whether the follower is in the committed ISR after this fetch (a throttled replica
    /// in sync is never held back).
    pub in_sync: bool,
}

impl Partition {
    /// Kafka's `fetchRecords` for a follower: checks the leader epoch and that the replica
    /// is assigned, answers a diverging epoch when the follower's last fetched epoch does not
    /// end where it fetches from, else reads up to the log end (not the high watermark) and
    /// records the follower's progress.
    pub fn fetch_for_follower(
        &self,
        fetch: &FollowerFetch,
        now_ms: i64,
    ) -> Result<FollowerRead, PartitionError> {
        self.check_online()?;
        let (plan, diverging_epoch, leader_end_offset) = {
            let state = self.state.read();
            check_current_leader_epoch(fetch.current_leader_epoch, state.leader_epoch)?;
            Self::check_leader(&state)?;
            if !state.followers.contains_key(&fetch.replica_id) {
                return Err(PartitionError::NotLeaderOrFollower);
            }
            let log = self.log.lock();
            let leader_end_offset = log.log_end_offset();
            match diverging_epoch(&log, fetch)? {
                Some(diverging) => (None, Some(diverging), leader_end_offset),
                None => (
                    Some(log.read_plan(fetch.fetch_offset, leader_end_offset)?),
                    None,
                    leader_end_offset,
                ),
            }
        };
        let records = match plan {
            Some(plan) => {
                plan.read(fetch.max_bytes, fetch.min_one_batch)
                    .inspect_err(|error| self.on_read_error(error))?
                    .records
            }
            None => FileSlice::empty(),
        };
        let isr_change = if diverging_epoch.is_none() {
            self.update_follower_fetch_state(fetch, leader_end_offset, now_ms)?
        } else {
            None
        };
        let in_sync = self.state.read().isr.contains(&fetch.replica_id);
        let log = self.log.lock();
        Ok(FollowerRead {
            records,
            diverging_epoch,
            high_watermark: log.high_watermark(),
            log_start_offset: log.log_start_offset(),
            isr_change,
            in_sync,
        })
    }

    /// Kafka's `updateFollowerFetchState`: records the follower's fetch, then expands the
    /// ISR if it caught up (returned, to send) and moves the high watermark.
    pub(crate) fn update_follower_fetch_state(
        &self,
        fetch: &FollowerFetch,
        leader_end_offset: i64,
        now_ms: i64,
    ) -> Result<Option<PendingIsrChange>, PartitionError> {
        let mut state = self.state.write();
        Self::check_leader(&state)?;
        let Some(follower) = state.followers.get_mut(&fetch.replica_id) else {
            return Err(PartitionError::NotLeaderOrFollower);
        };
        follower.update_fetch_state(
            fetch.fetch_offset,
            fetch.log_start_offset,
            now_ms,
            leader_end_offset,
        );
        let mut log = self.log.lock();
        let change = self.maybe_expand_isr(&mut state, &log, fetch.replica_id);
        self.maybe_increment_high_watermark(&state, &mut log, now_ms);
        Ok(change)
    }

    /// Kafka's `maybeExpandIsr`: a follower outside the ISR joins it once it has reached the
    /// high watermark and this leader epoch's start offset, unless a change is in flight.
    fn maybe_expand_isr(
        &self,
        state: &mut PartitionState,
        log: &Log,
        replica_id: i32,
    ) -> Option<PendingIsrChange> {
        if state.pending_isr.is_some() || state.isr.contains(&replica_id) {
            return None;
        }
        let follower = state.followers.get(&replica_id)?;
        let in_sync = follower.log_end_offset >= log.high_watermark()
            && follower.log_end_offset >= state.leader_epoch_start_offset;
        if !in_sync {
            return None;
        }
        let mut new_isr = state.isr.clone();
        new_isr.push(replica_id);
        Some(self.propose_isr(state, new_isr))
    }

    /// Kafka's `maybeShrinkIsr` (run every `replica.lag.time.max.ms` / 2): followers of the
    /// ISR that have not caught up within `replica.lag.time.max.ms` leave it. The change is
    /// returned, to send; until it commits they still count for the high watermark.
    pub fn maybe_shrink_isr(&self, now_ms: i64) -> Option<PendingIsrChange> {
        let mut state = self.state.write();
        if state.role != Role::Leader || state.pending_isr.is_some() {
            return None;
        }
        let leader_end_offset = self.log.lock().log_end_offset();
        let lagging = |id: &i32| {
            *id != self.local_broker_id
                && state.followers.get(id).is_none_or(|follower| {
                    !follower.is_caught_up(leader_end_offset, now_ms, self.replica_lag_time_max_ms)
                })
        };
        if !state.isr.iter().any(lagging) {
            return None;
        }
        let new_isr: Vec<i32> = state
            .isr
            .iter()
            .copied()
            .filter(|id| !lagging(id))
            .collect();
        tracing::info!(
            partition = %self.topic_partition,
            isr = ?state.isr,
            ?new_isr,
            "shrinking the ISR: followers lagged more than replica.lag.time.max.ms"
        );
        Some(self.propose_isr(&mut state, new_isr))
    }

    fn propose_isr(&self, state: &mut PartitionState, new_isr: Vec<i32>) -> PendingIsrChange {
        let change = PendingIsrChange {
            topic_id: self.topic_id,
            partition: self.topic_partition.partition,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr,
        };
        state.pending_isr = Some(change.clone());
        change
    }

    /// Whether `change` is still this partition's pending ISR change.
    pub fn is_pending(&self, change: &PendingIsrChange) -> bool {
        self.state.read().pending_isr.as_ref() == Some(change)
    }

    /// Applies the controller's answer to `change` (Kafka's `handleAlterPartitionUpdate` and
    /// `handleAlterPartitionError`). A commit becomes the ISR and partition epoch; a refusal
    /// that says nothing was changed (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA) drops the
    /// change; any other refusal (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
    /// NEW_LEADER_ELECTED, an unknown partition...) leaves it pending until the metadata brings
    /// the partition's new state. A stale answer is ignored.
    pub fn handle_alter_partition_result(
        &self,
        change: &PendingIsrChange,
        result: AlterPartitionResult,
    ) {
        let mut state = self.state.write();
        if state.pending_isr.as_ref() != Some(change) {
            return;
        }
        match result {
            AlterPartitionResult::Committed {
                leader_epoch,
                isr,
                partition_epoch,
            } => {
                if leader_epoch != state.leader_epoch || partition_epoch < state.partition_epoch {
                    return;
                }
                tracing::info!(partition = %self.topic_partition, ?isr, partition_epoch, "ISR updated");
                state.isr = isr;
                state.partition_epoch = partition_epoch;
                state.pending_isr = None;
                self.maybe_increment_high_watermark(&state, &mut self.log.lock(), now_ms());
                drop(state);
                self.notify_waiters();
            }
            AlterPartitionResult::Refused(
                ResponseError::OperationNotAttempted | ResponseError::IneligibleReplica,
            ) => {
                state.pending_isr = None;
            }
            AlterPartitionResult::Refused(error) => {
                tracing::info!(
                    partition = %self.topic_partition,
                    %error,
                    "the controller refused an ISR change; waiting for the partition's metadata"
                );
            }
        }
    }

    /// Kafka's `maybeIncrementLeaderHW`: the smallest log end offset of the maximal ISR (this
    /// leader's own included) and of caught-up followers about to join it. A follower whose
    /// offset is unknown holds it back; it never goes back.
    pub(super) fn maybe_increment_high_watermark(
        &self,
        state: &PartitionState,
        log: &mut Log,
        now_ms: i64,
    ) -> bool {
        if state.role != Role::Leader {
            return false;
        }
        let leader_end_offset = log.log_end_offset();
        let maximal_isr = state.maximal_isr();
        let candidate = state
            .followers
            .iter()
            .filter(|(id, follower)| {
                maximal_isr.contains(id)
                    || follower.is_caught_up(
                        leader_end_offset,
                        now_ms,
                        self.replica_lag_time_max_ms,
                    )
            })
            .map(|(_, follower)| follower.log_end_offset)
            .fold(leader_end_offset, i64::min);
        let moved = log.maybe_increment_high_watermark(candidate);
        if moved {
            self.high_watermark_changes
                .send_replace(log.high_watermark());
        }
        moved
    }

    /// Kafka's `checkEnoughReplicasReachOffset` for DelayedProduce: `None` while the high
    /// watermark is below `required_offset`; then `Ok`, or NOT_ENOUGH_REPLICAS_AFTER_APPEND
    /// if the maximal ISR fell below `min.insync.replicas`; NOT_LEADER_OR_FOLLOWER once this
    /// replica no longer leads.
    pub fn check_enough_replicas_reach_offset(
        &self,
        required_offset: i64,
    ) -> Option<Result<(), ResponseError>> {
        let state = self.state.read();
        if state.role != Role::Leader {
            return Some(Err(ResponseError::NotLeaderOrFollower));
        }
        let log = self.log.lock();
        if log.high_watermark() < required_offset {
            return None;
        }
        let min_isr = usize::try_from(log.config().min_insync_replicas).unwrap_or(0);
        if state.maximal_isr().len() < min_isr {
            return Some(Err(ResponseError::NotEnoughReplicasAfterAppend));
        }
        Some(Ok(()))
    }

    /// The followers' fetch state (leader only), for DescribeQuorum-like reporting.
    pub fn follower_states(&self) -> Vec<(i32, crate::partition::replica::ReplicaState)> {
        let state = self.state.read();
        let mut followers: Vec<_> = state.followers.iter().map(|(id, s)| (*id, *s)).collect();
        followers.sort_by_key(|(id, _)| *id);
        followers
    }

    /// Follower only: checks that this replica still follows at `leader_epoch`, the epoch
    /// the fetcher fetched at.
    fn check_follower(&self, leader_epoch: i32) -> Result<(), PartitionError> {
        self.check_online()?;
        let state = self.state.read();
        match state.role {
            Role::Follower if state.leader_epoch == leader_epoch => Ok(()),
            Role::Follower => Err(PartitionError::FencedLeaderEpoch),
            Role::Leader => Err(PartitionError::NotLeaderOrFollower),
            Role::Deleted => Err(PartitionError::Deleted),
        }
    }

    /// Appends batches fetched from the leader at `leader_epoch`, then takes the leader's
    /// high watermark, bounded by this log's end, and its log start offset (DeleteRecords on
    /// the leader reaches the followers), as Kafka's `processPartitionData` does.
    pub fn append_as_follower(
        &self,
        leader_epoch: i32,
        records: &[u8],
        leader: LeaderOffsets,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        self.check_follower(leader_epoch)?;
        let mut log = self.log.lock();
        let info = log
            .append_as_follower(records, now_ms)
            .inspect_err(|error| {
                if let krust_storage::AppendError::Storage(cause) = error {
                    self.failures
                        .maybe_add_offline_log_dir(&self.log_dir, cause);
                }
            })?;
        if log.maybe_increment_high_watermark(leader.high_watermark) {
            self.high_watermark_changes
                .send_replace(log.high_watermark());
        }
        log.maybe_increment_log_start_offset(leader.log_start_offset)
            .inspect_err(|e| self.on_storage_error(e))?;
        Ok(info)
    }

    /// Follower only: cuts the log at `offset` (see `Log::truncate_to`); the new log end.
    pub fn truncate_to(&self, leader_epoch: i32, offset: i64) -> Result<i64, PartitionError> {
        self.check_follower(leader_epoch)?;
        let mut log = self.log.lock();
        log.truncate_to(offset)
            .inspect_err(|e| self.on_storage_error(e))?;
        Ok(log.log_end_offset())
    }

    /// Follower only: empties the log, which now starts at `offset` (the leader's start).
    pub fn truncate_fully_and_start_at(
        &self,
        leader_epoch: i32,
        offset: i64,
    ) -> Result<(), PartitionError> {
        self.check_follower(leader_epoch)?;
        self.log
            .lock()
            .truncate_fully_and_start_at(offset)
            .inspect_err(|e| self.on_storage_error(e))?;
        Ok(())
    }

    /// The log's latest leader epoch and end offset: where a follower fetches from.
    pub fn fetch_position(&self) -> (Option<i32>, i64) {
        let log = self.log.lock();
        (log.latest_epoch(), log.log_end_offset())
    }

    /// The largest epoch <= `epoch` in this log and where it ends (Kafka's `endOffsetForEpoch`
    /// on the follower), or `None`.
    pub fn local_end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let log = self.log.lock();
        match log.end_offset_for_epoch(epoch) {
            (-1, _) | (_, -1) => None,
            found => Some(found),
        }
    }

    fn on_storage_error(&self, error: &krust_storage::StorageError) {
        if let krust_storage::StorageError::Io { source, .. } = error {
            self.failures
                .maybe_add_offline_log_dir(&self.log_dir, source);
        }
    }
}

/// KIP-320 / KIP-595 as in Kafka's `readFromLocalLog`: the follower's last fetched epoch
/// must end at or after its fetch offset on this leader, else it diverged.
fn diverging_epoch(log: &Log, fetch: &FollowerFetch) -> Result<Option<(i32, i64)>, ReadError> {
    if fetch.last_fetched_epoch < 0 {
        return Ok(None);
    }
    let (epoch, end_offset) = log.end_offset_for_epoch(fetch.last_fetched_epoch);
    if epoch < 0 || end_offset < 0 {
        return Err(ReadError::OffsetOutOfRange {
            offset: fetch.fetch_offset,
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
        });
    }
    if end_offset < fetch.fetch_offset || epoch < fetch.last_fetched_epoch {
        return Ok(Some((epoch, end_offset)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
