//! What the transaction coordinator (Python, `krust.transaction`) asks of the core: producer
//! ids, requests to other brokers, and the partition leader's side of WriteTxnMarkers.

use bytes::Bytes;
use krust_storage::append_origin::AppendOrigin;
use krust_storage::control_batch::end_txn_marker;

use crate::broker::{Broker, INTERNAL_REPLICATION_TIMEOUT};
use crate::clock::now_ms;
use crate::controller_channel::broker_channels::BrokerRequestError;
use crate::transaction::producer_ids::ProducerIdError;

/// Why a producer id could not be handed out to the transaction coordinator.
#[derive(Debug, thiserror::Error)]
pub enum NextProducerIdError {
    #[error("the broker is not serving yet")]
    NotServing,
    #[error(transparent)]
    Allocation(#[from] ProducerIdError),
}

impl Broker {
    /// A new producer id from this broker's block (asking the controller for a new block when
    /// it runs out). Blocks; for a thread outside the runtime.
    pub fn next_producer_id(&self) -> Result<i64, NextProducerIdError> {
        let (bridge, runtime) = {
            let serving = self.serving.lock();
            let serving = serving.as_ref().ok_or(NextProducerIdError::NotServing)?;
            (serving.bridge.clone(), serving.runtime.clone())
        };
        let channels = self.controller_channels();
        Ok(runtime.block_on(self.producer_ids.next_producer_id(channels, &bridge))?)
    }

    /// Sends a request body to broker `node` over the inter-broker listener and returns the
    /// response body. Blocks; for a thread outside the runtime.
    pub fn send_to_broker(
        &self,
        node: i32,
        api_key: i16,
        version: i16,
        body: Bytes,
    ) -> Result<Bytes, BrokerRequestError> {
        self.broker_channels
            .send_blocking(node, api_key, version, body)
    }
}

/// One WriteTxnMarkers entry for one partition this broker should lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarker {
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

impl Broker {
    /// The partition leader's side of WriteTxnMarkers: appends each marker as a coordinator
    /// (acks=-1, as Kafka) and waits until the in-sync replicas have them all. Returns each
    /// marker's Kafka error code, in order (0: written and replicated).
    pub fn write_txn_markers(&self, markers: &[TxnMarker]) -> Vec<i16> {
        let now = now_ms();
        let mut codes = vec![0; markers.len()];
        let mut appended = Vec::new();
        for (index, marker) in markers.iter().enumerate() {
            let batch = end_txn_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.commit,
                now,
            );
            let written = self
                .replicas
                .leader_partition(&marker.topic, marker.partition)
                .and_then(|partition| {
                    partition.end_transaction_verification(marker.producer_id);
                    partition
                        .append_records_to_leader(AppendOrigin::Coordinator, &batch, -1, now)
                        .map(|info| (partition, info.last_offset + 1))
                        .map_err(|error| error.kafka_error_code())
                });
            match written {
                Ok(append) => appended.push((index, append)),
                Err(code) => codes[index] = code,
            }
        }
        let (indexes, appends): (Vec<usize>, Vec<_>) = appended.into_iter().unzip();
        let outcomes = self
            .replicas
            .await_replication(appends, INTERNAL_REPLICATION_TIMEOUT);
        for (index, outcome) in indexes.into_iter().zip(outcomes) {
            if let Err(error) = outcome {
                codes[index] = error.kafka_error_code();
            }
        }
        codes
    }
}
