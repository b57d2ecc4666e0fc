//! What a node's ApiVersions answer says (KIP-35): the versions it takes of each API, and per
//! API the highest version both sides take. Asking for it is [`crate::handshake`]'s job.

use std::collections::HashMap;

use kafka_protocol::messages::ApiVersionsResponse;

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
