//! How this node reaches the active controller: over the controller channels when it belongs
//! to a quorum of several voters, or in-process through the bridge when it is a quorum of
//! one (no controller listener then). Requests the core makes itself (auto-created topics,
//! producer id blocks) and forwarded client requests go this way.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Request};

use crate::bridge::{Bridge, BridgeError};
use crate::controller_channel::{
    ChannelError, ControllerChannel, ControllerLocator, REQUEST_TIMEOUT,
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
    pub forwarding: ControllerChannel,
    /// The core's own requests: topic auto-creation, producer id blocks.
    pub internal: ControllerChannel,
    /// BrokerRegistration and BrokerHeartbeat (sent by Python's broker lifecycle).
    pub lifecycle: ControllerChannel,
    /// AlterPartition from partition leaders.
    pub alter_partition: ControllerChannel,
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
            ControllerChannel::start(name, settings.node_id, Arc::clone(locator), REQUEST_TIMEOUT)
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
    let Some(channels) = channels else {
        return Ok(bridge.call_internal(request, version).await?);
    };
    let mut body = BytesMut::new();
    request
        .encode(&mut body, version)
        .map_err(|e| ControllerError::Codec(e.to_string()))?;
    let api_key = ApiKey::try_from(R::KEY)
        .map_err(|_| ControllerError::Codec(format!("api key {}", R::KEY)))?;
    let mut response: Bytes = channels
        .internal
        .send(api_key, version, body.freeze())
        .await?;
    R::Response::decode(&mut response, version).map_err(|e| ControllerError::Codec(e.to_string()))
}
