//! Handlers of the apis the core answers natively, without crossing to Python.

pub mod api_versions;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_topic_partitions;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, DeleteRecordsRequest, DescribeClusterRequest,
    DescribeLogDirsRequest, DescribeProducersRequest, DescribeTopicPartitionsRequest, FetchRequest,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::Decodable;

use crate::request_context::{respond, respond_as, Outcome, RequestContext};
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
    DescribeProducers(DescribeProducersRequest),
    DescribeTopicPartitions(DescribeTopicPartitionsRequest),
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
            ApiKey::DescribeProducers => Self::DescribeProducers(decode_exact(body, version)?),
            ApiKey::DescribeTopicPartitions => {
                Self::DescribeTopicPartitions(decode_exact(body, version)?)
            }
            ApiKey::DeleteRecords => Self::DeleteRecords(decode_exact(body, version)?),
            ApiKey::SaslHandshake => Self::SaslHandshake(decode_exact(body, version)?),
            ApiKey::SaslAuthenticate => Self::SaslAuthenticate(decode_exact(body, version)?),
            other => return Err(format!("{other:?} has no native handler")),
        })
    }
}

/// Runs the native handler of a decoded request.
pub async fn handle_native(
    context: &ServerContext,
    request: &RequestContext<'_>,
    decoded: NativeRequest,
) -> Outcome {
    match decoded {
        NativeRequest::ApiVersions(r) => {
            respond(request, &api_versions::handle(context, request, r))
        }
        NativeRequest::Metadata(r) => {
            respond(request, &metadata::handle(context, r, request).await)
        }
        NativeRequest::Produce(r) => produce::handle(context, r, request).await,
        NativeRequest::Fetch(r) => fetch::handle(context, r, request).await,
        NativeRequest::ListOffsets(r) => respond_as(
            request,
            &list_offsets::handle(context, r, request.version()),
            list_offsets::codec_version(request.version()),
        ),
        NativeRequest::DescribeCluster(r) => respond(
            request,
            &describe_cluster::handle(context, r, &request.session.listener_name),
        ),
        NativeRequest::InitProducerId(r) => respond(
            request,
            &init_producer_id::handle(context, r, request).await,
        ),
        NativeRequest::OffsetForLeaderEpoch(r) => {
            respond(request, &offset_for_leader_epoch::handle(context, r))
        }
        NativeRequest::DescribeLogDirs(r) => {
            respond(request, &describe_log_dirs::handle(context, r))
        }
        NativeRequest::DescribeProducers(r) => {
            respond(request, &describe_producers::handle(context, r))
        }
        NativeRequest::DescribeTopicPartitions(r) => {
            respond(request, &describe_topic_partitions::handle(context, r))
        }
        NativeRequest::DeleteRecords(r) => {
            respond(request, &delete_records::handle(context, r, request).await)
        }
        NativeRequest::SaslHandshake(r) => respond(request, &sasl::handshake(r)),
        NativeRequest::SaslAuthenticate(r) => respond(request, &sasl::authenticate(r)),
    }
}
