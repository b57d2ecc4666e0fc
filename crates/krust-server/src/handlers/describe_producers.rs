//! DescribeProducers (KIP-664): the producer state each partition's log keeps, so operators
//! can find the producer behind a hanging transaction.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use crate::server_context::ServerContext;

/// Answers a DescribeProducers; topics in `denied` (no READ) get TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    context: &ServerContext,
    request: DescribeProducersRequest,
    denied: &HashSet<String>,
) -> DescribeProducersResponse {
    let image = context.metadata.image();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let known = image.topic(name).is_some();
            let refused = denied.contains(name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let response = PartitionResponse::default().with_partition_index(index);
                    if refused {
                        return with_error(
                            response,
                            ResponseError::TopicAuthorizationFailed.code(),
                        );
                    }
                    if !known {
                        return with_error(response, ResponseError::UnknownTopicOrPartition.code());
                    }
                    let producers = context
                        .replicas
                        .hosted_partition(name, index)
                        .and_then(|p| p.active_producers().map_err(|e| e.kafka_error_code()));
                    match producers {
                        Ok(producers) => response.with_active_producers(
                            producers
                                .into_iter()
                                .map(|(id, entry)| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(id))
                                        .with_producer_epoch(i32::from(entry.producer_epoch))
                                        .with_last_sequence(entry.last_seq())
                                        .with_last_timestamp(entry.last_timestamp())
                                        .with_coordinator_epoch(entry.coordinator_epoch)
                                        .with_current_txn_start_offset(
                                            entry.current_txn_first_offset,
                                        )
                                })
                                .collect(),
                        ),
                        Err(code) => with_error(response, code),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// An error with Kafka's message for it, as the admin client prints it.
fn with_error(response: PartitionResponse, code: i16) -> PartitionResponse {
    let message = ResponseError::try_from_code(code).map(|e| e.to_string());
    response
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}
