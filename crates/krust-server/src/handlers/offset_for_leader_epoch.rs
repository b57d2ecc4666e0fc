//! OffsetForLeaderEpoch (KIP-101, KIP-320): where each requested leader epoch ended, from the
//! leader's epoch cache. Consumers ask it after a leader change to detect log truncation.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::server_context::ServerContext;

/// Answers an OffsetForLeaderEpoch; topics in `denied` (no DESCRIBE) get
/// TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    context: &ServerContext,
    request: OffsetForLeaderEpochRequest,
    denied: &HashSet<String>,
) -> OffsetForLeaderEpochResponse {
    let image = context.metadata.image();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.as_str();
            let known = image.topic(name).is_some();
            let refused = denied.contains(name);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let response = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if refused {
                        return response
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    if !known {
                        return response
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    }
                    let found = context
                        .replicas
                        .leader_partition(name, p.partition)
                        .and_then(|partition| {
                            partition
                                .last_offset_for_leader_epoch(
                                    p.current_leader_epoch,
                                    p.leader_epoch,
                                )
                                .map_err(|error| error.kafka_error_code())
                        });
                    match found {
                        Ok((epoch, end_offset)) => response
                            .with_leader_epoch(epoch)
                            .with_end_offset(end_offset),
                        Err(code) => response.with_error_code(code),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
