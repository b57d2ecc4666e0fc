//! Requests from this broker to other brokers (Kafka's NetworkClient to a broker node): the
//! transaction coordinator's WriteTxnMarkers to partition leaders and a partition leader's
//! KIP-890 verification with a transaction coordinator. One [`NodeChannel`] per destination,
//! made on first use, to the address the metadata image gives for the inter-broker listener.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Request};
use parking_lot::Mutex;

use crate::controller_channel::node_channel::{
    host_port, ChannelError, ChannelTarget, NodeChannel, TargetNode,
};
use crate::metadata::metadata_cache::MetadataCache;

/// Kafka's `request.timeout.ms` default for inter-broker requests.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed request to another broker.
#[derive(Debug, thiserror::Error)]
pub enum BrokerRequestError {
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error("cannot start a channel to broker {node}: {source}")]
    Start { node: i32, source: std::io::Error },
    #[error("cannot encode or decode a request to broker {node}: {reason}")]
    Codec { node: i32, reason: String },
    #[error("unknown api key {0}")]
    UnknownApi(i16),
}

/// One broker's address on the inter-broker listener, read from the metadata image each time
/// (the broker may have moved since the channel was made).
struct BrokerTarget {
    node_id: i32,
    listener: String,
    metadata: Arc<MetadataCache>,
}

impl ChannelTarget for BrokerTarget {
    fn wait_node(&self, _deadline: Instant) -> Result<TargetNode, String> {
        let image = self.metadata.image();
        let broker = image
            .brokers
            .get(&self.node_id)
            .ok_or_else(|| format!("broker {} is not registered", self.node_id))?;
        let (host, port) = broker.address_for(&self.listener);
        Ok(TargetNode {
            id: self.node_id,
            address: host_port(host, port),
        })
    }
}

/// The channels of this broker to the others, by node id.
pub struct BrokerChannels {
    node_id: i32,
    listener: String,
    metadata: Arc<MetadataCache>,
    channels: Mutex<HashMap<i32, NodeChannel>>,
}

impl BrokerChannels {
    /// Channels from broker `node_id` to the others' `listener` endpoints.
    pub fn new(node_id: i32, listener: String, metadata: Arc<MetadataCache>) -> Self {
        Self {
            node_id,
            listener,
            metadata,
            channels: Mutex::default(),
        }
    }

    fn channel(&self, node: i32) -> Result<NodeChannel, BrokerRequestError> {
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(&node) {
            return Ok(channel.clone());
        }
        let target = BrokerTarget {
            node_id: node,
            listener: self.listener.clone(),
            metadata: Arc::clone(&self.metadata),
        };
        let channel = NodeChannel::start(
            &format!("broker-{node}"),
            self.node_id,
            Arc::new(target),
            REQUEST_TIMEOUT,
        )
        .map_err(|source| BrokerRequestError::Start { node, source })?;
        channels.insert(node, channel.clone());
        Ok(channel)
    }

    /// Sends a request body to broker `node` and returns the response body; for a thread
    /// outside the async runtime (Python's calls).
    pub fn send_blocking(
        &self,
        node: i32,
        api_key: i16,
        version: i16,
        body: Bytes,
    ) -> Result<Bytes, BrokerRequestError> {
        let api = ApiKey::try_from(api_key).map_err(|_| BrokerRequestError::UnknownApi(api_key))?;
        Ok(self.channel(node)?.send_blocking(api, version, body)?)
    }

    /// Sends `request` to broker `node` and decodes the answer.
    pub async fn send<R: Request>(
        &self,
        node: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, BrokerRequestError> {
        let codec = |reason: String| BrokerRequestError::Codec { node, reason };
        let mut body = BytesMut::new();
        request
            .encode(&mut body, version)
            .map_err(|e| codec(e.to_string()))?;
        let api = ApiKey::try_from(R::KEY).map_err(|_| BrokerRequestError::UnknownApi(R::KEY))?;
        let mut response = self
            .channel(node)?
            .send(api, version, body.freeze())
            .await?;
        R::Response::decode(&mut response, version).map_err(|e| codec(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_the_metadata_does_not_know_is_an_error_naming_it() {
        let channels = BrokerChannels::new(1, "PLAINTEXT".to_string(), Arc::default());
        let error = channels
            .send_blocking(7, ApiKey::ApiVersions as i16, 0, Bytes::new())
            .unwrap_err();
        assert!(
            error.to_string().contains("broker 7 is not registered"),
            "{error}"
        );
        let unknown_api = channels
            .send_blocking(7, 9999, 0, Bytes::new())
            .unwrap_err();
        assert!(matches!(unknown_api, BrokerRequestError::UnknownApi(9999)));
    }
}
