//! How this node reaches the active controller: over the controller channels when it belongs
//! to a quorum of several voters, or in-process through the bridge when it is a quorum of
//! one (no controller listener then). Requests the core makes itself (auto-created topics,
//! producer id blocks) and forwarded client requests go this way.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{AlterPartitionRequest, ApiKey};
use kafka_protocol::protocol::{Decodable, Request};

use crate::bridge::{Bridge, BridgeError};
use crate::controller_channel::node_channel::{
    ChannelError, ControllerLocator, NodeChannel, REQUEST_TIMEOUT,
};
use crate::replica::alter_partition::{
    AlterPartitionFuture, AlterPartitionSendError, AlterPartitionSender,
};
use crate::settings::BrokerSettings;

/// A failed request to the controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Bridge(#[from] BridgeError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error("cannot encode or decode a controller request: {0}")]
    Codec(String),
}

/// The channels of a node in a quorum of several voters, one per kind of traffic so that
/// none waits behind another (Kafka keeps one NodeToControllerChannelManager per kind).
#[derive(Clone)]
pub struct ControllerChannels {
    /// Client requests forwarded in Envelopes.
    pub forwarding: NodeChannel,
    /// The core's own requests: topic auto-creation, producer id blocks.
    pub internal: NodeChannel,
    /// BrokerRegistration and BrokerHeartbeat (sent by Python's broker lifecycle).
    pub lifecycle: NodeChannel,
    /// AlterPartition from partition leaders.
    pub alter_partition: NodeChannel,
}

impl ControllerChannels {
    /// The channels of a clustered node; `None` for a quorum of one.
    pub fn start(
        settings: &BrokerSettings,
        locator: &Arc<ControllerLocator>,
    ) -> std::io::Result<Option<Self>> {
        if !settings.clustered() {
            return Ok(None);
        }
        let start = |name| {
            NodeChannel::start(
                name,
                settings.node_id,
                Arc::clone(locator) as _,
                REQUEST_TIMEOUT,
            )
        };
        Ok(Some(Self {
            forwarding: start("forwarding")?,
            internal: start("internal")?,
            lifecycle: start("lifecycle")?,
            alter_partition: start("alter-partition")?,
        }))
    }
}

/// Sends a request the core makes itself to the active controller, wherever it is.
pub async fn call_controller<R: Request>(
    channels: Option<&ControllerChannels>,
    bridge: &Bridge,
    request: &R,
    version: i16,
) -> Result<R::Response, ControllerError> {
    match channels {
        Some(channels) => send_on(&channels.internal, request, version).await,
        None => Ok(bridge.call_internal(request, version).await?),
    }
}

/// Sends `request` over `channel` and decodes the answer.
async fn send_on<R: Request>(
    channel: &NodeChannel,
    request: &R,
    version: i16,
) -> Result<R::Response, ControllerError> {
    let mut body = BytesMut::new();
    request
        .encode(&mut body, version)
        .map_err(|e| ControllerError::Codec(e.to_string()))?;
    let api_key = ApiKey::try_from(R::KEY)
        .map_err(|_| ControllerError::Codec(format!("api key {}", R::KEY)))?;
    let mut response: Bytes = channel.send(api_key, version, body.freeze()).await?;
    R::Response::decode(&mut response, version).map_err(|e| ControllerError::Codec(e.to_string()))
}

/// AlterPartition v3 (with the broker epoch and the new ISR members' epochs), the newest
/// version the controller serves.
const ALTER_PARTITION_VERSION: i16 = 3;

/// Sends the partition leaders' ISR changes to the active controller over the
/// alter-partition channel (the replica manager's `AlterPartitionSender`), stamped with this
/// broker's epoch. A quorum of one has one broker, whose partitions have no followers and
/// never change their ISR: it has no channel, and a request fails.
pub struct ControllerAlterPartition {
    channel: Option<NodeChannel>,
    broker_epoch: Arc<AtomicI64>,
}

impl ControllerAlterPartition {
    /// `broker_epoch` is this broker's registration epoch as the lifecycle last learnt it
    /// (-1 before that: the controller then does not check it).
    pub fn new(channels: Option<&ControllerChannels>, broker_epoch: Arc<AtomicI64>) -> Self {
        Self {
            channel: channels.map(|c| c.alter_partition.clone()),
            broker_epoch,
        }
    }
}

/// The request in v3's shape: this broker's epoch, and the new ISR only with the members'
/// broker epochs (KIP-903; v3 has no plain list).
fn as_version_3(request: AlterPartitionRequest, broker_epoch: i64) -> AlterPartitionRequest {
    let mut request = request.with_broker_epoch(broker_epoch);
    for partition in request
        .topics
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut())
    {
        partition.new_isr.clear();
    }
    request
}

impl AlterPartitionSender for ControllerAlterPartition {
    fn send(&self, request: AlterPartitionRequest) -> AlterPartitionFuture {
        let request = as_version_3(request, self.broker_epoch.load(Ordering::Relaxed));
        let channel = self.channel.clone();
        Box::pin(async move {
            let Some(channel) = channel else {
                return Err(AlterPartitionSendError(
                    "a quorum of one has no controller channel".into(),
                ));
            };
            send_on(&channel, &request, ALTER_PARTITION_VERSION)
                .await
                .map_err(|e| AlterPartitionSendError(e.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::Encodable;
    use uuid::Uuid;

    use super::*;
    use crate::partition::isr_change::PendingIsrChange;
    use crate::replica::alter_partition::request_for;

    #[test]
    fn an_isr_change_encodes_as_version_3_with_the_broker_epoch() {
        let change = PendingIsrChange {
            topic_id: Uuid::from_u128(7),
            partition: 2,
            leader_epoch: 3,
            partition_epoch: 4,
            new_isr: vec![1, 2],
        };
        let request = request_for(1, &change);
        let mut body = BytesMut::new();
        assert!(request.encode(&mut body, ALTER_PARTITION_VERSION).is_err());
        let request = as_version_3(request, 42);
        request.encode(&mut body, ALTER_PARTITION_VERSION).unwrap();
        assert_eq!(request.broker_epoch, 42);
        let partition = &request.topics[0].partitions[0];
        let members: Vec<i32> = partition
            .new_isr_with_epochs
            .iter()
            .map(|m| m.broker_id.0)
            .collect();
        assert_eq!(members, vec![1, 2]);
    }
}
