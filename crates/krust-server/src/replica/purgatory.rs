//! Requests that wait: DelayedProduce (acks=all until the high watermark covers the append)
//! and DelayedFetch (until enough bytes arrive or max wait passes).
//!
//! A waiting request is a parked future watching the high watermarks of its partitions; its
//! deadline lives in tokio's timer, which is a hierarchical timing wheel, so no thread is held
//! per waiting request.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select_all;
use kafka_protocol::error::ResponseError;
use tokio::sync::watch;

use crate::partition::Partition;

/// DelayedProduce: waits until each partition's high watermark reaches its required offset
/// and answers per partition (Kafka's `checkEnoughReplicasReachOffset`): `Some(Ok)`, or an
/// error (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER); `None` if `timeout`
/// passed first.
pub async fn await_produce_acks(
    waits: &[(Arc<Partition>, i64)],
    timeout: Duration,
) -> Vec<Option<Result<(), ResponseError>>> {
    let mut outcomes = vec![None; waits.len()];
    let all_answered = async {
        for ((partition, required), outcome) in waits.iter().zip(outcomes.iter_mut()) {
            let mut changes = partition.watch_high_watermark();
            loop {
                if let Some(answer) = partition.check_enough_replicas_reach_offset(*required) {
                    *outcome = Some(answer);
                    break;
                }
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(timeout, all_answered).await;
    outcomes
}

/// Watches a set of partitions so a fetch can sleep until any of them gets new data.
pub struct NewDataWatch {
    receivers: Vec<watch::Receiver<i64>>,
}

impl NewDataWatch {
    /// Starts watching; changes from now on wake `wait`. A consumer waits for the high
    /// watermark to move, a follower for the log end (`for_follower`).
    pub fn new(partitions: &[Arc<Partition>], for_follower: bool) -> Self {
        let receivers = partitions
            .iter()
            .map(|p| {
                let mut rx = if for_follower {
                    p.watch_log_end()
                } else {
                    p.watch_high_watermark()
                };
                rx.mark_unchanged();
                rx
            })
            .collect();
        NewDataWatch { receivers }
    }

    /// Sleeps until a watched high watermark moves or `timeout` passes.
    pub async fn wait(&mut self, timeout: Duration) {
        if self.receivers.is_empty() {
            tokio::time::sleep(timeout).await;
            return;
        }
        let changes = select_all(self.receivers.iter_mut().map(|rx| Box::pin(rx.changed())));
        let _ = tokio::time::timeout(timeout, changes).await;
    }
}
