//! Handlers of the apis the core answers natively, without crossing to Python, and what a
//! request costs against its quotas. Choosing the handler (`network::dispatch`) and the state
//! they act on (`replica`, `partition`, `metadata`) live elsewhere.

pub mod alter_replica_log_dirs;
pub mod api_versions;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl;
pub mod throttling;

use std::collections::{HashMap, HashSet};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, ApiKey, ApiVersionsRequest, DeleteRecordsRequest,
    DescribeClusterRequest, DescribeLogDirsRequest, DescribeProducersRequest,
    DescribeQuorumRequest, DescribeTopicPartitionsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::authorizer::{all_operations, AclOperation, Action, ResourceType, TOPIC_OPERATIONS};
use crate::handlers::throttling::{charge_request_time, ThrottleTime};
use crate::request::request_context::{respond, respond_as, Outcome, RequestContext};
use crate::server_context::ServerContext;

/// A decoded request of an api the core answers itself.
#[derive(Debug)]
pub enum NativeRequest {
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    DescribeCluster(DescribeClusterRequest),
    InitProducerId(InitProducerIdRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    AlterReplicaLogDirs(AlterReplicaLogDirsRequest),
    DescribeProducers(DescribeProducersRequest),
    DescribeTopicPartitions(DescribeTopicPartitionsRequest),
    DescribeQuorum(DescribeQuorumRequest),
    DeleteRecords(DeleteRecordsRequest),
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
}

fn decode_exact<T: Decodable>(mut body: Bytes, version: i16) -> Result<T, String> {
    let decoded = T::decode(&mut body, version).map_err(|e| format!("malformed request: {e}"))?;
    if body.has_remaining() {
        // Kafka ignores trailing bytes too (librdkafka's ApiVersions v3+ carries some).
        tracing::debug!("{} unread bytes after the request body", body.remaining());
    }
    Ok(decoded)
}

impl NativeRequest {
    /// Decodes a request body (after the header); an error means the connection is closed.
    pub fn decode(api_key: ApiKey, version: i16, body: Bytes) -> Result<Self, String> {
        Ok(match api_key {
            ApiKey::ApiVersions => Self::ApiVersions(decode_exact(body, version)?),
            ApiKey::Metadata => Self::Metadata(decode_exact(body, version)?),
            ApiKey::Produce => Self::Produce(decode_exact(body, version)?),
            ApiKey::Fetch => Self::Fetch(decode_exact(body, version)?),
            ApiKey::ListOffsets => {
                Self::ListOffsets(decode_exact(body, list_offsets::codec_version(version))?)
            }
            ApiKey::DescribeCluster => Self::DescribeCluster(decode_exact(body, version)?),
            ApiKey::InitProducerId => Self::InitProducerId(decode_exact(body, version)?),
            ApiKey::OffsetForLeaderEpoch => {
                Self::OffsetForLeaderEpoch(decode_exact(body, version)?)
            }
            ApiKey::DescribeLogDirs => Self::DescribeLogDirs(decode_exact(body, version)?),
            ApiKey::AlterReplicaLogDirs => Self::AlterReplicaLogDirs(decode_exact(body, version)?),
            ApiKey::DescribeProducers => Self::DescribeProducers(decode_exact(body, version)?),
            ApiKey::DescribeTopicPartitions => {
                Self::DescribeTopicPartitions(decode_exact(body, version)?)
            }
            ApiKey::DescribeQuorum => Self::DescribeQuorum(decode_exact(body, version)?),
            ApiKey::DeleteRecords => Self::DeleteRecords(decode_exact(body, version)?),
            ApiKey::SaslHandshake => Self::SaslHandshake(decode_exact(body, version)?),
            ApiKey::SaslAuthenticate => Self::SaslAuthenticate(decode_exact(body, version)?),
            other => return Err(format!("{other:?} has no native handler")),
        })
    }
}

/// The topics among `names` the request may not do `operation` on; none without an
/// authorizer (then nothing is asked at all).
pub(crate) async fn denied_topics<'n>(
    context: &ServerContext,
    request: &RequestContext<'_>,
    operation: AclOperation,
    names: impl IntoIterator<Item = &'n str>,
) -> HashSet<String> {
    match &context.authorizer {
        None => HashSet::new(),
        Some(authorizer) => {
            authorizer
                .denied(request, operation, ResourceType::Topic, names)
                .await
        }
    }
}

/// Whether the request may do `operation` on the cluster; always without an authorizer.
pub(crate) async fn cluster_allows(
    context: &ServerContext,
    request: &RequestContext<'_>,
    operation: AclOperation,
) -> bool {
    match &context.authorizer {
        None => true,
        Some(authorizer) => {
            authorizer
                .allows(request, Action::on_cluster(operation))
                .await
        }
    }
}

/// KIP-430: the operations among `supported` the request may perform on the resource, as
/// Kafka's bit field; every one of them without an authorizer.
pub(crate) async fn authorized_operations(
    context: &ServerContext,
    request: &RequestContext<'_>,
    resource_type: ResourceType,
    name: &str,
    supported: &[AclOperation],
) -> i32 {
    match &context.authorizer {
        None => all_operations(supported),
        Some(authorizer) => {
            authorizer
                .authorized_operations(request, resource_type, name, supported)
                .await
        }
    }
}

/// DESCRIBE and KIP-430's operations of the topics a DescribeTopicPartitions names (or all).
async fn describe_topic_partitions_authorization(
    context: &ServerContext,
    request: &RequestContext<'_>,
    decoded: &DescribeTopicPartitionsRequest,
) -> describe_topic_partitions::TopicAuthorization {
    let Some(authorizer) = &context.authorizer else {
        return describe_topic_partitions::TopicAuthorization::default();
    };
    let image = context.metadata.image();
    let names = describe_topic_partitions::requested_names(&image, decoded);
    let denied = authorizer
        .denied(
            request,
            AclOperation::Describe,
            ResourceType::Topic,
            names.iter().map(String::as_str),
        )
        .await;
    let mut operations = HashMap::new();
    for name in names.into_iter().filter(|name| !denied.contains(name)) {
        let bits = authorizer
            .authorized_operations(request, ResourceType::Topic, &name, TOPIC_OPERATIONS)
            .await;
        operations.insert(name, bits);
    }
    describe_topic_partitions::TopicAuthorization {
        denied,
        operations: Some(operations),
    }
}

/// Runs the native handler of a decoded request.
pub async fn handle_native(
    context: &ServerContext,
    request: &RequestContext<'_>,
    decoded: NativeRequest,
) -> Outcome {
    let version = request.version();
    match decoded {
        NativeRequest::ApiVersions(r) => metered(
            context,
            request,
            api_versions::handle(context, request, r),
            version,
        ),
        NativeRequest::Metadata(r) => metered(
            context,
            request,
            metadata::handle(context, r, request).await,
            version,
        ),
        NativeRequest::Produce(r) => produce::handle(context, r, request).await,
        NativeRequest::Fetch(r) => fetch::handle(context, r, request).await,
        NativeRequest::ListOffsets(r) => {
            let names = r.topics.iter().map(|t| t.name.0.as_str());
            let denied = denied_topics(context, request, AclOperation::Describe, names).await;
            metered(
                context,
                request,
                list_offsets::handle(context, r, version, &denied),
                list_offsets::codec_version(version),
            )
        }
        NativeRequest::DescribeCluster(r) => metered(
            context,
            request,
            describe_cluster::handle(context, r, request).await,
            version,
        ),
        NativeRequest::InitProducerId(r) => metered(
            context,
            request,
            init_producer_id::handle(context, r, request).await,
            version,
        ),
        NativeRequest::OffsetForLeaderEpoch(r) => {
            // As Kafka: brokers (CLUSTER_ACTION) may ask for any topic, clients need DESCRIBE.
            let denied = if cluster_allows(context, request, AclOperation::ClusterAction).await {
                HashSet::new()
            } else {
                let names = r.topics.iter().map(|t| t.topic.0.as_str());
                denied_topics(context, request, AclOperation::Describe, names).await
            };
            metered(
                context,
                request,
                offset_for_leader_epoch::handle(context, r, &denied),
                version,
            )
        }
        NativeRequest::DescribeLogDirs(r) => {
            let response = if cluster_allows(context, request, AclOperation::Describe).await {
                describe_log_dirs::handle(context, r)
            } else {
                describe_log_dirs::cluster_authorization_failed()
            };
            metered(context, request, response, version)
        }
        NativeRequest::AlterReplicaLogDirs(r) => {
            let response = if cluster_allows(context, request, AclOperation::Alter).await {
                alter_replica_log_dirs::handle(context, r)
            } else {
                alter_replica_log_dirs::cluster_authorization_failed(&r)
            };
            metered(context, request, response, version)
        }
        NativeRequest::DescribeProducers(r) => {
            let names = r.topics.iter().map(|t| t.name.0.as_str());
            let denied = denied_topics(context, request, AclOperation::Read, names).await;
            metered(
                context,
                request,
                describe_producers::handle(context, r, &denied),
                version,
            )
        }
        NativeRequest::DescribeTopicPartitions(r) => {
            let authorized = describe_topic_partitions_authorization(context, request, &r).await;
            metered(
                context,
                request,
                describe_topic_partitions::handle(context, r, &authorized),
                version,
            )
        }
        NativeRequest::DescribeQuorum(r) => {
            // No throttle time field in DescribeQuorum: nothing to meter into.
            let response = if cluster_allows(context, request, AclOperation::Describe).await {
                describe_quorum::handle(context, r)
            } else {
                describe_quorum::cluster_authorization_failed()
            };
            respond(request, &response)
        }
        NativeRequest::DeleteRecords(r) => metered(
            context,
            request,
            delete_records::handle(context, r, request).await,
            version,
        ),
        NativeRequest::SaslHandshake(r) => respond(request, &sasl::handshake(r)),
        NativeRequest::SaslAuthenticate(r) => respond(request, &sasl::authenticate(r)),
    }
}

/// The response, encoded as `codec_version`, with the request's handling time charged
/// against its client's request_percentage (Kafka's request quota).
fn metered<T: Encodable + ThrottleTime>(
    context: &ServerContext,
    request: &RequestContext<'_>,
    mut response: T,
    codec_version: i16,
) -> Outcome {
    let throttle = charge_request_time(context, request, &mut response);
    respond_as(request, &response, codec_version).throttled(throttle)
}
