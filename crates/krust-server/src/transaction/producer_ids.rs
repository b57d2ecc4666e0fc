//! Producer ids for idempotent producers, handed out from blocks the controller allocates
//! (AllocateProducerIds, as Kafka brokers ask their controller), so ids never repeat across
//! restarts.

use kafka_protocol::messages::{AllocateProducerIdsRequest, BrokerId};
use tokio::sync::Mutex;

use crate::bridge::Bridge;
use crate::controller_channel::controller_route::{
    call_controller, ControllerChannels, ControllerError,
};

const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;

/// Why no producer id could be handed out.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error("the controller refused a producer id block with error {0}")]
    Refused(i16),
}

#[derive(Default)]
struct Block {
    next: i64,
    end: i64,
}

/// Hands out producer ids, refilling from the controller when the current block runs out.
pub struct ProducerIdManager {
    node_id: i32,
    block: Mutex<Block>,
}

impl ProducerIdManager {
    pub fn new(node_id: i32) -> Self {
        ProducerIdManager {
            node_id,
            block: Mutex::new(Block::default()),
        }
    }

    pub async fn next_producer_id(
        &self,
        channels: Option<&ControllerChannels>,
        bridge: &Bridge,
    ) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            let request = AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(self.node_id))
                .with_broker_epoch(-1);
            let response =
                call_controller(channels, bridge, &request, ALLOCATE_PRODUCER_IDS_VERSION).await?;
            if response.error_code != 0 {
                return Err(ProducerIdError::Refused(response.error_code));
            }
            block.next = response.producer_id_start.0;
            block.end = response.producer_id_start.0 + i64::from(response.producer_id_len);
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}
