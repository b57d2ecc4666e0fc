//! Requests that wait: DelayedProduce (acks=all until the high watermark covers the append)
//! and DelayedFetch (until enough bytes arrive or max wait passes).
//!
//! A waiting request is a parked future watching the high watermarks of its partitions; its
//! deadline lives in tokio's timer, which is a hierarchical timing wheel, so no thread is held
//! per waiting request.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::select_all;
use tokio::sync::watch;

use crate::partition::Partition;

/// Waits until every partition's high watermark reaches its required offset; false on timeout.
pub async fn await_high_watermarks(waits: &[(Arc<Partition>, i64)], timeout: Duration) -> bool {
    let all_reached = async {
        for (partition, required) in waits {
            let mut watermark = partition.watch_high_watermark();
            if watermark.wait_for(|hw| *hw >= *required).await.is_err() {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(timeout, all_reached)
        .await
        .unwrap_or(false)
}

/// Watches a set of partitions so a fetch can sleep until any of them gets new data.
pub struct NewDataWatch {
    receivers: Vec<watch::Receiver<i64>>,
}

impl NewDataWatch {
    /// Starts watching; changes from now on wake `wait`.
    pub fn new(partitions: &[Arc<Partition>]) -> Self {
        let receivers = partitions
            .iter()
            .map(|p| {
                let mut rx = p.watch_high_watermark();
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
