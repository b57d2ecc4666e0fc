//! The client software a connection names in its ApiVersions request (KIP-511), kept in its
//! session as Kafka's `ChannelMetadataRegistry` keeps `ClientInformation`.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::Decodable;

use crate::request::request_context::parse_header;
use crate::security::session::ClientSoftware;

/// The name and version an ApiVersions v3+ request frame carries, if it is one and names both
/// (Kafka registers them only from a valid request; an invalid one is answered INVALID_REQUEST
/// by the handler and changes nothing).
pub fn client_software(frame: &Bytes) -> Option<ClientSoftware> {
    let (api_key, header, mut body) = parse_header(frame.clone()).ok()?;
    if api_key != ApiKey::ApiVersions || header.request_api_version < 3 {
        return None;
    }
    let request = ApiVersionsRequest::decode(&mut body, header.request_api_version).ok()?;
    let name = request.client_software_name.to_string();
    let version = request.client_software_version.to_string();
    (valid(&name) && valid(&version)).then_some(ClientSoftware { name, version })
}

/// Kafka's `ApiVersionsRequest.isValid` pattern: `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            edge(first)
                && edge(last)
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafkas_pattern() {
        assert!(valid("librdkafka"));
        assert!(valid("2.16.2"));
        assert!(valid("apache-kafka-java"));
        assert!(!valid(""));
        assert!(!valid("-x"));
        assert!(!valid("a b"));
    }
}
