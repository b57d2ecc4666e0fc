//! ApiVersions: which apis and versions this broker serves to this session (natively and
//! through Python), as the routing table says.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::request_context::RequestContext;
use crate::server_context::ServerContext;
use crate::session::Session;

fn advertised(context: &ServerContext, session: &Session) -> Vec<ApiVersion> {
    context
        .routes
        .enabled(session)
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

pub fn handle(
    context: &ServerContext,
    request: &RequestContext<'_>,
    _body: ApiVersionsRequest,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(advertised(context, request.session))
}

/// The v0 answer to an ApiVersions request of a version newer than ours (KIP-511).
pub fn unsupported_version_response(
    context: &ServerContext,
    session: &Session,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(advertised(context, session))
}
