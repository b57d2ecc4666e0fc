//! An ISR change a leader proposes and the controller's verdict on it (KIP-497). The partition
//! owns its ISR, so it owns these; sending them to the controller is
//! `replica::alter_partition`'s job.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

/// An ISR change this leader proposed and the controller has not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingIsrChange {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    /// The partition epoch the change is based on (the controller refuses an older one).
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// The controller's verdict on one partition of an AlterPartition request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterPartitionResult {
    Committed {
        leader_epoch: i32,
        isr: Vec<i32>,
        partition_epoch: i32,
    },
    Refused(ResponseError),
}
