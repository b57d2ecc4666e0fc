//! AlterPartition (KIP-497): a leader asks the controller to change a partition's ISR, and
//! until the controller commits the change the partition counts the larger ("maximal") ISR.
//!
//! The core does not talk to the controller itself: it hands each request to an
//! [`AlterPartitionSender`] the broker is started with (the controller channel), and applies
//! the answer to the partition, as Kafka's `AlterPartitionManager` and `Partition` do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};
use tokio::runtime::Handle;

use crate::partition::isr_change::{AlterPartitionResult, PendingIsrChange};
use crate::partition::Partition;

/// Why an AlterPartition request got no answer from the controller.
#[derive(Debug, thiserror::Error)]
#[error("AlterPartition did not reach the controller: {0}")]
pub struct AlterPartitionSendError(pub String);

/// The answer to one AlterPartition request.
pub type AlterPartitionFuture =
    Pin<Box<dyn Future<Output = Result<AlterPartitionResponse, AlterPartitionSendError>> + Send>>;

/// Sends AlterPartition requests to the active controller (the broker's controller channel,
/// Kafka's `NodeToControllerChannelManager`). The implementation sets `broker_epoch` (and the
/// `broker_epoch` of each `new_isr_with_epochs` entry it knows) and picks the version; the
/// request carries topic ids and both ISR forms.
pub trait AlterPartitionSender: Send + Sync {
    fn send(&self, request: AlterPartitionRequest) -> AlterPartitionFuture;
}

/// First and longest wait between attempts when the controller cannot be reached.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(5);

/// Sends each proposed ISR change and applies the answer (Kafka's `AlterPartitionManager`):
/// one request per change, retried while the controller cannot be reached and the change is
/// still the partition's pending one.
pub struct AlterPartitionManager {
    node_id: i32,
    sender: Arc<dyn AlterPartitionSender>,
    runtime: Handle,
}

impl AlterPartitionManager {
    pub fn new(node_id: i32, sender: Arc<dyn AlterPartitionSender>, runtime: Handle) -> Self {
        AlterPartitionManager {
            node_id,
            sender,
            runtime,
        }
    }

    /// The runtime replication runs on.
    pub fn runtime(&self) -> &Handle {
        &self.runtime
    }

    /// Sends `change` for `partition` in the background.
    pub fn submit(&self, partition: Arc<Partition>, change: PendingIsrChange) {
        let sender = Arc::clone(&self.sender);
        let request = request_for(self.node_id, &change);
        self.runtime.spawn(async move {
            let mut backoff = RETRY_BACKOFF;
            loop {
                match sender.send(request.clone()).await {
                    Ok(response) => match result_for(&response, &change) {
                        Some(result) => {
                            partition.handle_alter_partition_result(&change, result);
                            return;
                        }
                        None => tracing::warn!(
                            partition = %partition.topic_partition,
                            error = response.error_code,
                            "AlterPartition failed; retrying"
                        ),
                    },
                    Err(error) => tracing::warn!(
                        partition = %partition.topic_partition,
                        %error,
                        "retrying AlterPartition"
                    ),
                }
                if !partition.is_pending(&change) {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_RETRY_BACKOFF);
            }
        });
    }
}

/// The AlterPartition request proposing `change`.
pub fn request_for(node_id: i32, change: &PendingIsrChange) -> AlterPartitionRequest {
    let partition = PartitionData::default()
        .with_partition_index(change.partition)
        .with_leader_epoch(change.leader_epoch)
        .with_partition_epoch(change.partition_epoch)
        .with_new_isr(change.new_isr.iter().map(|id| BrokerId(*id)).collect())
        .with_new_isr_with_epochs(
            change
                .new_isr
                .iter()
                .map(|id| {
                    BrokerState::default()
                        .with_broker_id(BrokerId(*id))
                        .with_broker_epoch(-1)
                })
                .collect(),
        );
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(node_id))
        .with_broker_epoch(-1)
        .with_topics(vec![TopicData::default()
            .with_topic_id(change.topic_id)
            .with_partitions(vec![partition])])
}

/// The verdict on `change` in `response`; `None` when the whole request failed (retry).
pub fn result_for(
    response: &AlterPartitionResponse,
    change: &PendingIsrChange,
) -> Option<AlterPartitionResult> {
    if response.error_code != 0 {
        return None;
    }
    let data = response
        .topics
        .iter()
        .filter(|t| t.topic_id == change.topic_id)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == change.partition);
    let Some(data) = data else {
        return Some(AlterPartitionResult::Refused(
            ResponseError::UnknownTopicOrPartition,
        ));
    };
    Some(match ResponseError::try_from_code(data.error_code) {
        None => AlterPartitionResult::Committed {
            leader_epoch: data.leader_epoch,
            isr: data.isr.iter().map(|id| id.0).collect(),
            partition_epoch: data.partition_epoch,
        },
        Some(error) => AlterPartitionResult::Refused(error),
    })
}
