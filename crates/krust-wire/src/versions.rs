//! ApiVersions negotiation (KIP-35, KIP-511): the client asks the node which versions of
//! each API it takes, and then uses, per API, the highest version both sides take.
//!
//! KIP-511: the client sends its newest ApiVersions version. A node that does not know that
//! version answers in the v0 format with UNSUPPORTED_VERSION and, where it can, its own
//! ApiVersions range; the client then asks again at the highest version the node takes (v0
//! when it said nothing).

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Message, Request, StrBytes};

use crate::connection::Connection;
use crate::error::{ApiName, WireError};
use crate::frame;

/// The name and version clients report in ApiVersions v3+ (KIP-511).
const SOFTWARE_NAME: &str = "krust-wire";
const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version ranges a node takes, by api key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersionsTable {
    ranges: HashMap<i16, (i16, i16)>,
}

impl ApiVersionsTable {
    /// The ranges of an ApiVersions response.
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        Self {
            ranges: response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
        }
    }

    /// The node's `(min, max)` versions of `api_key`, if it takes the API at all.
    pub fn range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.ranges.get(&api_key).copied()
    }

    /// The highest version of `api_key` in both `min..=max` and the node's range.
    pub fn pick(&self, api_key: i16, min: i16, max: i16) -> Option<i16> {
        let (their_min, their_max) = self.range(api_key)?;
        let version = max.min(their_max);
        (version >= min.max(their_min)).then_some(version)
    }
}

/// Asks the node at the other end of `connection` for its ApiVersions.
pub async fn negotiate(connection: &Connection) -> Result<ApiVersionsTable, WireError> {
    let newest = ApiVersionsRequest::VERSIONS.max;
    let first = ask(connection, newest).await?;
    let response = match ResponseError::try_from_code(first.error_code) {
        Some(ResponseError::UnsupportedVersion) => {
            let theirs = ApiVersionsTable::from_response(&first)
                .range(ApiVersionsRequest::KEY)
                .map_or(0, |(_, max)| max.min(newest));
            ask(connection, theirs).await?
        }
        _ => first,
    };
    match ResponseError::try_from_code(response.error_code) {
        None => Ok(ApiVersionsTable::from_response(&response)),
        Some(error) => Err(WireError::ApiVersions {
            address: connection.address().to_string(),
            error,
        }),
    }
}

/// One ApiVersions request at `version`; the answer is read at `version`, or in the v0
/// format an UNSUPPORTED_VERSION answer comes in.
async fn ask(connection: &Connection, version: i16) -> Result<ApiVersionsResponse, WireError> {
    let api = ApiName(ApiVersionsRequest::KEY);
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(SOFTWARE_NAME))
        .with_client_software_version(StrBytes::from_static_str(SOFTWARE_VERSION));
    let frame = connection
        .round_trip(api, |correlation_id| {
            let header = RequestHeader::default()
                .with_request_api_key(ApiVersionsRequest::KEY)
                .with_request_api_version(version)
                .with_correlation_id(correlation_id)
                .with_client_id(Some(StrBytes::from_static_str(SOFTWARE_NAME)));
            frame::encode_request(&header, &request, version)
        })
        .await?;
    // The ApiVersions response header is always v0: the correlation id alone.
    let body: Bytes = frame.slice(4.min(frame.len())..);
    let at = |v: i16| ApiVersionsResponse::decode(&mut body.clone(), v);
    match at(version) {
        Ok(response) if response.error_code == 0 || version == 0 => Ok(response),
        first => at(0).or(first).map_err(|e| WireError::Codec {
            api,
            address: connection.address().to_string(),
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    use super::*;

    #[test]
    fn the_highest_common_version_is_picked() {
        let response = ApiVersionsResponse::default().with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(1)
                .with_min_version(4)
                .with_max_version(12),
            ApiVersion::default()
                .with_api_key(3)
                .with_min_version(0)
                .with_max_version(9),
        ]);
        let table = ApiVersionsTable::from_response(&response);
        assert_eq!(table.pick(1, 0, 18), Some(12));
        assert_eq!(table.pick(3, 10, 12), None);
        assert_eq!(table.pick(3, 0, 5), Some(5));
        assert_eq!(table.pick(0, 0, 5), None);
    }
}
