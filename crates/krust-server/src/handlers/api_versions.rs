//! ApiVersions: which apis and versions this broker serves to this session (natively and
//! through Python), as the routing table says, plus the supported and finalized feature levels
//! (KIP-584) from the metadata image.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::metadata::metadata_cache::MetadataImage;
use crate::request::request_context::RequestContext;
use crate::security::session::Session;
use crate::server_context::ServerContext;

/// ApiVersions v4 is the first whose clients read a supported minimum of 0 (KAFKA-17011).
const FIRST_VERSION_WITH_MIN_LEVEL_ZERO: i16 = 4;

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

/// Kafka omits features whose supported minimum is 0 below v4: older clients fail to parse them.
fn supported_features(image: &MetadataImage, version: i16) -> Vec<SupportedFeatureKey> {
    image
        .supported_features
        .iter()
        .filter(|(_, range)| version >= FIRST_VERSION_WITH_MIN_LEVEL_ZERO || range.min > 0)
        .map(|(name, range)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_min_version(range.min)
                .with_max_version(range.max)
        })
        .collect()
}

/// Level 0 means "disabled": Kafka lists only features finalized at 1 or more, min = max.
fn finalized_features(image: &MetadataImage) -> Vec<FinalizedFeatureKey> {
    image
        .finalized_features
        .iter()
        .filter(|(_, level)| **level != 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect()
}

pub fn handle(
    context: &ServerContext,
    request: &RequestContext<'_>,
    _body: ApiVersionsRequest,
) -> ApiVersionsResponse {
    let image = context.metadata.image();
    // Kafka's finalized features epoch is the offset of the metadata image the levels come from
    // (KRaftMetadataCache.features()).
    ApiVersionsResponse::default()
        .with_api_keys(advertised(context, request.session))
        .with_supported_features(supported_features(&image, request.version()))
        .with_finalized_features(finalized_features(&image))
        .with_finalized_features_epoch(image.metadata_offset)
        .with_zk_migration_ready(false)
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
