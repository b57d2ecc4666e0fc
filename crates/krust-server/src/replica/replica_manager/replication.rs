//! Replication in the `ReplicaManager` (Kafka's ReplicaManager makeLeaders/makeFollowers and
//! isr-expiration): which partitions the fetchers copy, and ISR changes sent to the controller.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;

use krust_storage::TopicPartition;

use super::ReplicaManager;
use crate::metadata::metadata_cache::PartitionMetadata;
use crate::partition::isr_change::PendingIsrChange;
use crate::partition::{Partition, Role, Transition};
use crate::replica::alter_partition::AlterPartitionManager;
use crate::replica::purgatory::await_produce_acks;
use crate::replica::replica_fetcher::ReplicaFetcherManager;
use crate::settings::ReplicationSettings;

impl ReplicaManager {
    /// The same manager with `replication` settings (replica.lag.time.max.ms...).
    pub fn with_replication_settings(self, replication: ReplicationSettings) -> Self {
        ReplicaManager {
            replication,
            ..self
        }
    }

    pub fn replication_settings(&self) -> &ReplicationSettings {
        &self.replication
    }

    /// Starts replication: followed partitions are fetched by `fetchers` (those already
    /// hosted at once), and ISR changes go out through `alter_partitions`. Later calls change
    /// nothing.
    pub fn start_replication(
        &self,
        fetchers: ReplicaFetcherManager,
        alter_partitions: AlterPartitionManager,
    ) {
        let _ = self.alter_partitions.set(alter_partitions);
        if self.fetchers.set(fetchers).is_err() {
            return;
        }
        for partition in self.hosted_partitions() {
            let state = partition.state();
            if state.role == Role::Follower && state.leader >= 0 {
                self.follow(partition, state.leader, state.leader_epoch);
            }
        }
    }

    /// The replica fetchers, once replication has started.
    pub fn fetchers(&self) -> Option<&ReplicaFetcherManager> {
        self.fetchers.get()
    }

    pub(super) fn follow(&self, partition: Arc<Partition>, leader: i32, leader_epoch: i32) {
        if let Some(fetchers) = self.fetchers.get() {
            fetchers.add_partition(partition, leader, leader_epoch);
        }
    }

    pub(super) fn stop_fetching(&self, tp: &TopicPartition) {
        if let Some(fetchers) = self.fetchers.get() {
            fetchers.remove_partition(tp);
        }
    }

    /// Sends an ISR change `partition` proposed to the controller.
    pub fn submit_isr_change(&self, partition: Arc<Partition>, change: PendingIsrChange) {
        match self.alter_partitions.get() {
            Some(manager) => manager.submit(partition, change),
            None => tracing::warn!(
                partition = %partition.topic_partition,
                "no controller channel for AlterPartition: the ISR change stays pending"
            ),
        }
    }

    /// Waits until the in-sync replicas have an internal append that ended at `end_offset`, as
    /// Kafka's coordinators write with acks=-1 and answer once the high watermark covers it.
    /// Nothing to wait for on a partition this broker does not lead through replication (a
    /// quorum of one, or before replication starts).
    pub fn await_internal_replication(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Result<(), NotReplicated> {
        let Some(partition) = self.partition(&tp.topic, tp.partition) else {
            return Ok(());
        };
        self.await_replication(vec![(partition, end_offset)], timeout)
            .pop()
            .unwrap_or(Ok(()))
    }

    /// `await_internal_replication` for several appends at once (transaction markers), each
    /// with its own outcome, in order.
    pub fn await_replication(
        &self,
        appends: Vec<(Arc<Partition>, i64)>,
        timeout: Duration,
    ) -> Vec<Result<(), NotReplicated>> {
        let Some(manager) = self.alter_partitions.get() else {
            return appends.iter().map(|_| Ok(())).collect();
        };
        // Already there (always so with no followers): no need for the runtime.
        let known: Vec<Option<Result<(), ResponseError>>> = appends
            .iter()
            .map(|(partition, end)| partition.check_enough_replicas_reach_offset(*end))
            .collect();
        let waited = if known.iter().all(Option::is_some) {
            known
        } else {
            manager
                .runtime()
                .block_on(await_produce_acks(&appends, timeout))
        };
        waited
            .into_iter()
            .map(|outcome| match outcome {
                Some(Ok(())) => Ok(()),
                Some(Err(error)) => Err(NotReplicated::Refused(error)),
                None => Err(NotReplicated::TimedOut(timeout)),
            })
            .collect()
    }

    /// Kafka's isr-expiration task: every partition this broker leads drops the followers
    /// that lagged more than `replica.lag.time.max.ms` from its ISR.
    pub fn maybe_shrink_isrs(&self, now_ms: i64) {
        for partition in self.hosted_partitions() {
            if let Some(change) = partition.maybe_shrink_isr(now_ms) {
                self.submit_isr_change(partition, change);
            }
        }
    }

    /// Applies `placement` to `partition` and starts or stops fetching accordingly.
    pub(super) fn transition(&self, partition: Arc<Partition>, placement: &PartitionMetadata) {
        match partition.apply(placement) {
            Transition::Leader => self.stop_fetching(&partition.topic_partition),
            // No leader (every replica of the ISR is down): nothing to fetch from until one is
            // elected.
            Transition::NewLeader if placement.leader < 0 => {
                self.stop_fetching(&partition.topic_partition);
            }
            Transition::NewLeader => {
                self.follow(partition, placement.leader, placement.leader_epoch);
            }
            Transition::Unchanged => {}
        }
    }
}

/// Why an internal append is not known to be on the in-sync replicas.
#[derive(Debug, thiserror::Error)]
pub enum NotReplicated {
    #[error("the in-sync replicas did not have it within {0:?}")]
    TimedOut(Duration),
    #[error("{0}")]
    Refused(ResponseError),
}

impl NotReplicated {
    /// The Kafka error a request that waited for it answers.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            NotReplicated::TimedOut(_) => ResponseError::RequestTimedOut.code(),
            NotReplicated::Refused(error) => error.code(),
        }
    }
}
