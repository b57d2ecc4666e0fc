//! KIP-890 part 1: before a transactional producer's batch starts a transaction on a
//! partition, the partition leader asks the transaction coordinator whether the partition was
//! added to that producer's ongoing transaction (AddPartitionsToTxn v4, verify only). A late
//! or stray produce, after the transaction ended or without AddPartitionsToTxn, is refused
//! instead of opening a transaction that no marker will ever close (a hanging transaction).

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::bridge::Bridge;
use crate::controller_channel::broker_channels::BrokerChannels;
use crate::metadata::metadata_cache::{MetadataCache, MetadataImage};

/// The transaction coordinator's internal topic.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The first AddPartitionsToTxn version brokers send (batched, with `verify_only`).
const VERIFY_VERSION: i16 = 4;

/// The first Produce version whose clients understand TRANSACTION_ABORTABLE (KIP-890).
const ABORTABLE_PRODUCE_VERSION: i16 = 12;

/// Java's `String.hashCode` over UTF-16 code units, as Kafka's partitioner of coordinator keys.
fn java_string_hash(key: &str) -> i32 {
    key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__transaction_state` partition of `transactional_id`: Kafka's
/// `Utils.abs(hashCode) % partitions`, where `abs(Integer.MIN_VALUE)` is 0.
pub fn coordinator_partition(transactional_id: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(transactional_id);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// A transactional producer's batch about to start a transaction on a partition.
pub struct Unverified<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// The coordinator of `transactional_id`: the leader of its `__transaction_state` partition.
fn coordinator_node(image: &MetadataImage, transactional_id: &str) -> Option<i32> {
    let topic = image.topic(TRANSACTION_STATE_TOPIC)?;
    let index = coordinator_partition(transactional_id, topic.partitions.len() as i32);
    let leader = topic.partition(index)?.leader;
    (leader >= 0 && image.brokers.contains_key(&leader)).then_some(leader)
}

/// Whom verification asks: the metadata says which node leads a transactional id's coordinator
/// partition; this node's coordinator is reached through the bridge, another's over a channel.
pub struct Coordinators<'a> {
    pub node_id: i32,
    pub metadata: &'a MetadataCache,
    pub bridge: &'a Bridge,
    pub broker_channels: &'a BrokerChannels,
}

/// Asks the coordinator whether `partitions` are in the producer's ongoing transaction and
/// returns the error of each partition that is not (as the Produce response must give it).
pub async fn verify(
    coordinators: &Coordinators<'_>,
    producer: &Unverified<'_>,
    partitions: &[(String, i32)],
    produce_version: i16,
) -> HashMap<(String, i32), i16> {
    let all = |error: ResponseError| {
        let code = for_producer(error.code(), produce_version);
        partitions.iter().map(|tp| (tp.clone(), code)).collect()
    };
    let image = coordinators.metadata.image();
    let Some(node) = coordinator_node(&image, producer.transactional_id) else {
        // As Kafka: no live coordinator (its topic missing, or no leader during a failover)
        // is COORDINATOR_NOT_AVAILABLE, which the producer retries.
        return all(ResponseError::CoordinatorNotAvailable);
    };
    let request = verify_request(producer, partitions);
    let answer = if node == coordinators.node_id {
        coordinators
            .bridge
            .call_internal(&request, VERIFY_VERSION)
            .await
            .map_err(|e| e.to_string())
    } else {
        coordinators
            .broker_channels
            .send(node, &request, VERIFY_VERSION)
            .await
            .map_err(|e| e.to_string())
    };
    match answer {
        Ok(response) => partition_errors(&response, produce_version),
        Err(reason) => {
            tracing::warn!(
                "cannot verify transaction {} with coordinator {node}: {reason}",
                producer.transactional_id
            );
            all(ResponseError::NetworkException)
        }
    }
}

fn verify_request(
    producer: &Unverified<'_>,
    partitions: &[(String, i32)],
) -> AddPartitionsToTxnRequest {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(entry) => entry.partitions.push(*partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            producer.transactional_id.to_string(),
        )))
        .with_producer_id(ProducerId(producer.producer_id))
        .with_producer_epoch(producer.producer_epoch)
        .with_verify_only(true)
        .with_topics(topics);
    AddPartitionsToTxnRequest::default().with_transactions(vec![transaction])
}

/// Kafka's mapping of the coordinator's answer for producers: a coordinator that cannot
/// answer now becomes NOT_ENOUGH_REPLICAS (which every client retries), PRODUCER_FENCED
/// becomes INVALID_PRODUCER_EPOCH, and TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for
/// clients older than Produce v12.
fn partition_errors(
    response: &AddPartitionsToTxnResponse,
    produce_version: i16,
) -> HashMap<(String, i32), i16> {
    let mut errors = HashMap::new();
    let top = response.error_code;
    for transaction in &response.results_by_transaction {
        for topic in &transaction.topic_results {
            for partition in &topic.results_by_partition {
                let code = if top != 0 {
                    top
                } else {
                    partition.partition_error_code
                };
                if code != 0 {
                    errors.insert(
                        (topic.name.0.to_string(), partition.partition_index),
                        for_producer(code, produce_version),
                    );
                }
            }
        }
    }
    errors
}

fn for_producer(code: i16, produce_version: i16) -> i16 {
    use ResponseError::*;
    match ResponseError::try_from_code(code) {
        Some(
            CoordinatorNotAvailable
            | NotCoordinator
            | CoordinatorLoadInProgress
            | ConcurrentTransactions,
        ) => NotEnoughReplicas.code(),
        Some(ProducerFenced) => InvalidProducerEpoch.code(),
        Some(ClusterAuthorizationFailed) => InvalidTxnState.code(),
        Some(TransactionAbortable) if produce_version < ABORTABLE_PRODUCE_VERSION => {
            InvalidTxnState.code()
        }
        _ => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactional_ids_map_to_kafkas_partitions() {
        // Java: "group".hashCode() == 98629247; "polygenelubricants".hashCode() == MIN_VALUE.
        assert_eq!(java_string_hash("group"), 98_629_247);
        assert_eq!(coordinator_partition("group", 50), 47);
        assert_eq!(coordinator_partition("polygenelubricants", 50), 0);
    }

    #[test]
    fn coordinator_errors_become_what_producers_retry_or_understand() {
        assert_eq!(for_producer(ResponseError::NotCoordinator.code(), 11), 19);
        // What `verify` answers when no broker leads the id's `__transaction_state` partition.
        assert_eq!(
            for_producer(ResponseError::CoordinatorNotAvailable.code(), 12),
            19
        );
        assert_eq!(for_producer(ResponseError::ProducerFenced.code(), 11), 47);
        assert_eq!(
            for_producer(ResponseError::TransactionAbortable.code(), 11),
            48
        );
        assert_eq!(
            for_producer(ResponseError::TransactionAbortable.code(), 12),
            120
        );
    }
}
