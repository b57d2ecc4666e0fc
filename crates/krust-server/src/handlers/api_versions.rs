//! ApiVersions: which apis and versions this broker serves (natively and through Python).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use crate::server::ServerContext;

/// UNSUPPORTED_VERSION
const UNSUPPORTED_VERSION: i16 = 35;

/// Version ranges of the apis the core answers itself. They start low enough for librdkafka's
/// feature probes (MsgVer2 needs Produce 3 and Fetch 4) and keep Metadata v0 for aiokafka.
const NATIVE_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeCluster, 0, 1),
];

/// The (min, max) versions of an api the core handles natively.
pub fn native_range(api_key: ApiKey) -> Option<(i16, i16)> {
    NATIVE_APIS
        .iter()
        .find(|(key, _, _)| *key == api_key)
        .map(|(_, min, max)| (*min, *max))
}

fn advertised(context: &ServerContext) -> Vec<ApiVersion> {
    let native = NATIVE_APIS
        .iter()
        .map(|(key, min, max)| (*key as i16, *min, *max));
    let python = context
        .bridge
        .python_apis()
        .iter()
        .map(|(key, (min, max))| (*key, *min, *max));
    let mut apis: Vec<ApiVersion> = native
        .chain(python)
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    apis.sort_by_key(|api| api.api_key);
    apis
}

pub fn handle(context: &ServerContext, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(advertised(context))
}

/// The v0 answer to an ApiVersions request of a version newer than ours (KIP-511).
pub fn unsupported_version_response(context: &ServerContext) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(UNSUPPORTED_VERSION)
        .with_api_keys(advertised(context))
}
