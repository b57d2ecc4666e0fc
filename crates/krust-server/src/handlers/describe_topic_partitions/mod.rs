//! DescribeTopicPartitions (KIP-966): topics and their partitions from the metadata cache,
//! paginated by a cursor and a partition limit, with ISR, eligible leader replicas (ELR) and
//! offline replicas. Kafka's Admin `describeTopics` uses it when the broker advertises it.

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::authorizer::{all_operations, TOPIC_OPERATIONS};
use crate::handlers::metadata::is_valid_topic_name;
use crate::metadata::metadata_cache::{MetadataImage, TopicMetadata};
use crate::server_context::ServerContext;

/// Kafka's default `max.request.partition.size.limit`: the most partitions one response holds.
pub const MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;

/// What the principal may do with the requested topics.
#[derive(Debug, Default)]
pub struct TopicAuthorization {
    /// Topics it may not DESCRIBE.
    pub denied: HashSet<String>,
    /// KIP-430's operations per topic; `None` (no authorizer): every operation of a topic.
    pub operations: Option<HashMap<String, i32>>,
}

impl TopicAuthorization {
    fn operations(&self, topic: &str) -> i32 {
        match &self.operations {
            None => all_operations(TOPIC_OPERATIONS),
            Some(by_topic) => by_topic.get(topic).copied().unwrap_or(0),
        }
    }
}

/// The topics a request names, or (none named) every topic: what is authorized.
pub fn requested_names(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
) -> Vec<String> {
    if request.topics.is_empty() {
        image.topics.keys().cloned().collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    }
}

/// Answers a DescribeTopicPartitions; topics the principal may not DESCRIBE are left out of an
/// all-topics answer and answer TOPIC_AUTHORIZATION_FAILED when named.
pub fn handle(
    context: &ServerContext,
    request: DescribeTopicPartitionsRequest,
    authorized: &TopicAuthorization,
) -> DescribeTopicPartitionsResponse {
    let image = context.metadata.image();
    let local = context.settings.node_id;
    // A local replica in a failed log dir is offline even though its broker is alive.
    let local_offline = |topic: &str, partition: i32| {
        context
            .replicas
            .hosted_partition(topic, partition)
            .is_err_and(|code| code == ResponseError::KafkaStorageError.code())
    };
    describe(&image, &request, authorized, &|topic, partition, broker| {
        broker == local && local_offline(topic, partition)
    })
}

/// Whether a replica (topic, partition, broker) sits in a failed log dir.
type OfflineDir<'a> = &'a dyn Fn(&str, i32, i32) -> bool;

/// The answer from `image` (Kafka's DescribeTopicPartitionsRequestHandler).
pub fn describe(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    authorized: &TopicAuthorization,
    offline_dir: OfflineDir<'_>,
) -> DescribeTopicPartitionsResponse {
    let cursor = request.cursor.as_ref();
    let cursor_topic = cursor.map_or("", |c| c.topic_name.0.as_str());
    let fetch_all = request.topics.is_empty();
    let mut names = requested_names(image, request);
    names.retain(|name| name.as_str() >= cursor_topic);
    names.sort();
    names.dedup();
    let cursor_invalid = cursor.is_some_and(|c| {
        c.partition_index < 0 || (!fetch_all && !names.iter().any(|n| *n == cursor_topic))
    });
    if cursor_invalid {
        return invalid_request(request);
    }
    let limit = request
        .response_partition_limit
        .clamp(1, MAX_REQUEST_PARTITION_SIZE_LIMIT);
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if remaining == 0 {
            // The next page starts at the beginning of this topic.
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        if authorized.denied.contains(&name) {
            if !fetch_all {
                response.topics.push(
                    missing_topic(&name)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                );
            }
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            if !fetch_all {
                response.topics.push(missing_topic(&name));
            }
            continue;
        };
        let start = match cursor {
            Some(c) if name == cursor_topic => c.partition_index,
            _ => 0,
        };
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let end = count.min(start.saturating_add(i32::try_from(remaining).unwrap_or(i32::MAX)));
        let partitions: Vec<_> = (start..end)
            .filter_map(|index| topic.partition(index))
            .map(|p| partition_response(image, topic, p, offline_dir))
            .collect();
        remaining -= partitions.len();
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(topic.topic_id)
                .with_is_internal(topic.internal)
                .with_partitions(partitions)
                .with_topic_authorized_operations(authorized.operations(&name)),
        );
        if end < count {
            response.next_cursor = Some(cursor_at(&name, end));
            break;
        }
    }
    response
}

fn partition_response(
    image: &MetadataImage,
    topic: &TopicMetadata,
    p: &crate::metadata::metadata_cache::PartitionMetadata,
    offline_dir: OfflineDir<'_>,
) -> DescribeTopicPartitionsResponsePartition {
    let brokers = |ids: &[i32]| ids.iter().map(|id| BrokerId(*id)).collect::<Vec<_>>();
    let leader = if image.brokers.contains_key(&p.leader) {
        p.leader
    } else {
        -1
    };
    let offline: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|id| !image.brokers.contains_key(id) || offline_dir(&topic.name, p.partition, *id))
        .collect();
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(p.partition)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(brokers(&p.replicas))
        .with_isr_nodes(brokers(&p.isr))
        // The metadata carries no ELR (KIP-966's eligible.leader.replicas.version is off), so
        // Kafka answers empty lists.
        .with_eligible_leader_replicas(Some(Vec::new()))
        .with_last_known_elr(Some(Vec::new()))
        .with_offline_replicas(brokers(&offline))
}

fn missing_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = if is_valid_topic_name(name) {
        ResponseError::UnknownTopicOrPartition
    } else {
        ResponseError::InvalidTopicException
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(topic_name(name)))
        .with_topic_id(Uuid::nil())
        .with_topic_authorized_operations(all_operations(TOPIC_OPERATIONS))
}

/// Kafka refuses a cursor outside the requested topics, or with a negative partition, by
/// answering INVALID_REQUEST for every requested topic.
fn invalid_request(request: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    DescribeTopicPartitionsResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_name(Some(t.name.clone()))
                    .with_topic_id(Uuid::nil())
            })
            .collect(),
    )
}

fn cursor_at(name: &str, partition_index: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(name))
        .with_partition_index(partition_index)
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

#[cfg(test)]
mod tests;
