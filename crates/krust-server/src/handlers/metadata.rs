//! Metadata: brokers, controller, and topics with partition leadership; auto-creates topics.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::authorizer::{
    AclOperation, ResourceType, CLUSTER_NAME, CLUSTER_OPERATIONS, TOPIC_OPERATIONS,
};
use crate::controller_channel::controller_route::call_controller;
use crate::handlers::{authorized_operations, cluster_allows, denied_topics};
use crate::metadata::metadata_cache::{MetadataImage, TopicMetadata};
use crate::request::request_context::RequestContext;
use crate::server_context::ServerContext;
/// Kafka's "authorized operations were not requested" marker.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
/// The CreateTopics version the core speaks to the controller.
const CREATE_TOPICS_VERSION: i16 = 7;

pub async fn handle(
    context: &ServerContext,
    request: MetadataRequest,
    ctx: &RequestContext<'_>,
) -> MetadataResponse {
    let version = ctx.version();
    // v0 has no null topic list: an empty list means every topic.
    let all_topics = match &request.topics {
        None => true,
        Some(topics) => version == 0 && topics.is_empty(),
    };
    let auto_create = context.settings.auto_create_topics_enable
        && (version < 4 || request.allow_auto_topic_creation);
    let mut image = context.metadata.image();
    let wanted = requested_topics(&request);
    // As Kafka: a topic the principal may not DESCRIBE is left out of an all-topics answer and
    // answers TOPIC_AUTHORIZATION_FAILED when named, whether or not it exists.
    let mut denied = if context.authorizer.is_none() {
        HashSet::new()
    } else {
        let names = described_names(&image, all_topics, &wanted);
        denied_topics(context, ctx, AclOperation::Describe, names).await
    };
    if auto_create {
        let mut missing: Vec<&String> = wanted
            .iter()
            .filter_map(|t| t.name.as_ref())
            .filter(|name| {
                image.topic(name).is_none() && is_valid_topic_name(name) && !denied.contains(*name)
            })
            .collect();
        // Creating needs CREATE on the cluster or on the topic.
        if !missing.is_empty() && !cluster_allows(context, ctx, AclOperation::Create).await {
            let names = missing.iter().map(|name| name.as_str());
            let refused = denied_topics(context, ctx, AclOperation::Create, names).await;
            missing.retain(|name| !refused.contains(*name));
            denied.extend(refused);
        }
        if !missing.is_empty() {
            // The controller, in Python, creates them.
            ctx.park();
            auto_create_topics(context, &missing).await;
            image = context.metadata.image();
        }
    }
    let mut topics: Vec<MetadataResponseTopic> = if all_topics {
        let mut all: Vec<&Arc<TopicMetadata>> = image
            .topics
            .values()
            .filter(|topic| !denied.contains(&topic.name))
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.into_iter()
            .map(|topic| topic_response(&image, topic, version))
            .collect()
    } else {
        wanted
            .iter()
            .map(|requested| lookup(&image, requested, version, &denied))
            .collect()
    };
    if request.include_topic_authorized_operations {
        for topic in topics.iter_mut().filter(|t| t.error_code == 0) {
            let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
            topic.topic_authorized_operations =
                authorized_operations(context, ctx, ResourceType::Topic, name, TOPIC_OPERATIONS)
                    .await;
        }
    }
    // KIP-430 (v8-v10), as DescribeCluster: only to a principal that may DESCRIBE the cluster.
    let cluster_operations = if !request.include_cluster_authorized_operations {
        AUTHORIZED_OPERATIONS_OMITTED
    } else if cluster_allows(context, ctx, AclOperation::Describe).await {
        let (cluster, supported) = (ResourceType::Cluster, CLUSTER_OPERATIONS);
        authorized_operations(context, ctx, cluster, CLUSTER_NAME, supported).await
    } else {
        0
    };
    // kafka-protocol refuses to encode a field set in a version that lacks it.
    let response = MetadataResponse::default()
        .with_brokers(brokers(&image, version, &ctx.session.listener_name))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations);
    let response = if version >= 1 {
        response.with_controller_id(BrokerId(image.controller_id))
    } else {
        response
    };
    if version >= 2 {
        response.with_cluster_id(Some(StrBytes::from_string(image.cluster_id.clone())))
    } else {
        response
    }
}

/// A topic asked for by name or (v10+) by id.
struct RequestedTopic {
    name: Option<String>,
    id: Uuid,
}

/// The names whose DESCRIBE decides the answer: every topic, or those asked for (by name, or
/// by id from v10: the name of the topic with that id).
fn described_names<'a>(
    image: &'a MetadataImage,
    all_topics: bool,
    wanted: &'a [RequestedTopic],
) -> Vec<&'a str> {
    if all_topics {
        return image.topics.keys().map(String::as_str).collect();
    }
    let by_id = |t: &RequestedTopic| image.topic_by_id(&t.id).map(|t| t.name.as_str());
    wanted
        .iter()
        .filter_map(|t| t.name.as_deref().or_else(|| by_id(t)))
        .collect()
}

fn requested_topics(request: &MetadataRequest) -> Vec<RequestedTopic> {
    request
        .topics
        .iter()
        .flatten()
        .map(|topic| RequestedTopic {
            name: topic.name.as_ref().map(|n| n.0.to_string()),
            id: topic.topic_id,
        })
        .collect()
}

fn lookup(
    image: &MetadataImage,
    requested: &RequestedTopic,
    version: i16,
    denied: &HashSet<String>,
) -> MetadataResponseTopic {
    let found = match &requested.name {
        Some(name) => image.topic(name),
        None => image.topic_by_id(&requested.id),
    };
    // As Kafka: a topic asked for by id and not authorized is TOPIC_AUTHORIZATION_FAILED too
    // (ids are not secret), without its name.
    let refused = match &requested.name {
        Some(name) => denied.contains(name),
        None => found.is_some_and(|topic| denied.contains(&topic.name)),
    };
    if let Some(topic) = found.filter(|_| !refused) {
        return topic_response(image, topic, version);
    }
    let error = match &requested.name {
        _ if refused => ResponseError::TopicAuthorizationFailed,
        Some(name) if !is_valid_topic_name(name) => ResponseError::InvalidTopicException,
        Some(_) => ResponseError::UnknownTopicOrPartition,
        None => ResponseError::UnknownTopicId,
    };
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(
            requested
                .name
                .as_ref()
                .map(|n| TopicName(StrBytes::from_string(n.clone()))),
        )
        .with_topic_id(requested.id)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn topic_response(
    image: &MetadataImage,
    topic: &TopicMetadata,
    version: i16,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let leader_alive = image.brokers.contains_key(&p.leader);
            MetadataResponsePartition::default()
                .with_error_code(if leader_alive {
                    0
                } else {
                    ResponseError::LeaderNotAvailable.code()
                })
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(if leader_alive { p.leader } else { -1 }))
                .with_leader_epoch(if version >= 7 { p.leader_epoch } else { -1 })
                .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(if version >= 10 {
            topic.topic_id
        } else {
            Uuid::nil()
        })
        .with_is_internal(version >= 1 && topic.internal)
        .with_partitions(partitions)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn brokers(image: &MetadataImage, version: i16, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .brokers
        .values()
        .map(|b| {
            let (host, port) = b.address_for(listener);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port)
                .with_rack(if version >= 1 {
                    b.rack.clone().map(StrBytes::from_string)
                } else {
                    None
                })
        })
        .collect()
}

/// Asks the controller to create topics with the broker defaults, as a Kafka broker forwards
/// auto-creation to its controller. Failures are left for the lookup to report.
async fn auto_create_topics(context: &ServerContext, names: &[&String]) {
    let topics = names
        .iter()
        .map(|name| {
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string((*name).clone())))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000);
    let channels = context.controller_channels.as_ref();
    match call_controller(channels, &context.bridge, &request, CREATE_TOPICS_VERSION).await {
        Ok(response) => {
            for topic in response.topics {
                if topic.error_code != 0
                    && topic.error_code != ResponseError::TopicAlreadyExists.code()
                {
                    tracing::info!(
                        "auto-creating topic {} failed with error {}",
                        topic.name.0.as_str(),
                        topic.error_code
                    );
                }
            }
        }
        Err(error) => tracing::warn!("auto-creating topics failed: {error}"),
    }
}

/// Kafka's legal topic names: 1-249 of [a-zA-Z0-9._-], not "." or "..".
pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}
