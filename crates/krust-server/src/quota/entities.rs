//! The client quotas the metadata log holds, and which one applies to a (user, client id):
//! Kafka's precedence of quota entities (ClientQuotaManager's DefaultQuotaCallback), most
//! specific first: /users/<u>/clients/<c>, /users/<u>/clients/<default>, /users/<u>,
//! /users/<default>/clients/<c>, /users/<default>/clients/<default>, /users/<default>,
//! /clients/<c>, /clients/<default>.

use std::collections::HashMap;
use std::net::IpAddr;

/// The quota types a client is metered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientQuotaType {
    Produce,
    Fetch,
    Request,
}

impl ClientQuotaType {
    pub const ALL: [ClientQuotaType; 3] = [Self::Produce, Self::Fetch, Self::Request];

    /// Kafka's quota config key of the type.
    pub fn key(self) -> &'static str {
        match self {
            Self::Produce => "producer_byte_rate",
            Self::Fetch => "consumer_byte_rate",
            Self::Request => "request_percentage",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// An entity name: a given one, or the entity type's default (`<default>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    fn from_option(name: Option<String>) -> Self {
        name.map_or(EntityName::Default, EntityName::Named)
    }
}

/// A user / client-id quota entity; at least one of the two is present.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

/// A quota entity type krust does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown quota entity type {0:?}")]
pub struct UnknownEntityType(pub String);

/// Quota values by type (None: not set).
pub type QuotaValues = [Option<f64>; 3];

/// One entity as the image lists it: (entity type, name; None: default) pairs and its quota
/// values by key.
pub type ImageEntity = (Vec<(String, Option<String>)>, HashMap<String, f64>);

/// Every client quota of the metadata image.
#[derive(Debug, Clone, Default)]
pub struct ClientQuotaTable {
    entities: HashMap<QuotaEntity, QuotaValues>,
    /// connection_creation_rate of an ip (None: the default ip entity).
    pub ip_connection_rates: HashMap<Option<IpAddr>, f64>,
}

impl ClientQuotaTable {
    /// The table from the image's entities, each a list of (entity type, name; None: default)
    /// and its quota values by key; keys the core does not enforce are ignored.
    pub fn from_entities(entities: Vec<ImageEntity>) -> Result<Self, UnknownEntityType> {
        let mut table = ClientQuotaTable::default();
        for (pairs, values) in entities {
            let mut entity = QuotaEntity {
                user: None,
                client_id: None,
            };
            let mut ip: Option<Option<String>> = None;
            for (entity_type, name) in pairs {
                match entity_type.as_str() {
                    "user" => entity.user = Some(EntityName::from_option(name)),
                    "client-id" => entity.client_id = Some(EntityName::from_option(name)),
                    "ip" => ip = Some(name),
                    _ => return Err(UnknownEntityType(entity_type)),
                }
            }
            if let Some(ip) = ip {
                let Some(rate) = values.get("connection_creation_rate") else {
                    continue;
                };
                match ip.map(|name| name.parse::<IpAddr>()).transpose() {
                    Ok(address) => {
                        table.ip_connection_rates.insert(address, *rate);
                    }
                    Err(_) => tracing::warn!("ignoring the connection quota of a host name"),
                }
                continue;
            }
            let mut quota = [None; 3];
            for quota_type in ClientQuotaType::ALL {
                quota[quota_type.index()] = values.get(quota_type.key()).copied();
            }
            if quota.iter().any(Option::is_some) {
                table.entities.insert(entity, quota);
            }
        }
        Ok(table)
    }

    /// Whether any user or client-id quota is set.
    pub fn has_client_quotas(&self) -> bool {
        !self.entities.is_empty()
    }

    fn get(
        &self,
        quota_type: ClientQuotaType,
        user: Option<&EntityName>,
        client: Option<&EntityName>,
    ) -> Option<f64> {
        let entity = QuotaEntity {
            user: user.cloned(),
            client_id: client.cloned(),
        };
        self.entities.get(&entity)?[quota_type.index()]
    }

    /// The quota of `quota_type` that applies to `user` and `client_id`, and the metric tags
    /// (user, client id; "" when the quota does not depend on it) of the rate it is metered
    /// by, so that clients sharing a quota entity share its rate.
    pub fn resolve(
        &self,
        quota_type: ClientQuotaType,
        user: &str,
        client_id: &str,
    ) -> (MetricTags, Option<f64>) {
        let tags = self.metric_tags(quota_type, user, client_id);
        let limit = self.limit(quota_type, &tags);
        (tags, limit)
    }

    fn metric_tags(&self, quota_type: ClientQuotaType, user: &str, client_id: &str) -> MetricTags {
        let u = EntityName::Named(user.to_string());
        let c = EntityName::Named(client_id.to_string());
        let d = EntityName::Default;
        let has = |user: Option<&EntityName>, client: Option<&EntityName>| {
            self.get(quota_type, user, client).is_some()
        };
        let both = MetricTags::new(user, client_id);
        if has(Some(&u), Some(&c)) || has(Some(&u), Some(&d)) {
            both
        } else if has(Some(&u), None) {
            MetricTags::new(user, "")
        } else if has(Some(&d), Some(&c)) || has(Some(&d), Some(&d)) {
            both
        } else if has(Some(&d), None) {
            MetricTags::new(user, "")
        } else {
            MetricTags::new("", client_id)
        }
    }

    fn limit(&self, quota_type: ClientQuotaType, tags: &MetricTags) -> Option<f64> {
        let u = EntityName::Named(tags.user.clone());
        let c = EntityName::Named(tags.client_id.clone());
        let d = EntityName::Default;
        let get = |user: Option<&EntityName>, client: Option<&EntityName>| {
            self.get(quota_type, user, client)
        };
        match (tags.user.is_empty(), tags.client_id.is_empty()) {
            (false, false) => get(Some(&u), Some(&c))
                .or_else(|| get(Some(&u), Some(&d)))
                .or_else(|| get(Some(&d), Some(&c)))
                .or_else(|| get(Some(&d), Some(&d))),
            (false, true) => get(Some(&u), None).or_else(|| get(Some(&d), None)),
            (true, false) => get(None, Some(&c)).or_else(|| get(None, Some(&d))),
            (true, true) => None,
        }
    }
}

/// Which rate a client's requests are metered by: Kafka's quota metric tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetricTags {
    pub user: String,
    pub client_id: String,
}

impl MetricTags {
    pub fn new(user: &str, client_id: &str) -> Self {
        MetricTags {
            user: user.to_string(),
            client_id: client_id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

    fn table(entries: &[(Entity<'_>, f64)]) -> ClientQuotaTable {
        ClientQuotaTable::from_entities(
            entries
                .iter()
                .map(|(pairs, rate)| {
                    let pairs = pairs
                        .iter()
                        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                        .collect();
                    (pairs, HashMap::from([("producer_byte_rate".into(), *rate)]))
                })
                .collect(),
        )
        .unwrap()
    }

    fn produce_limit(table: &ClientQuotaTable, user: &str, client: &str) -> Option<f64> {
        table.resolve(ClientQuotaType::Produce, user, client).1
    }

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        let all: Vec<(Entity<'_>, f64)> = vec![
            (&[("user", Some("u")), ("client-id", Some("c"))], 1.0),
            (&[("user", Some("u")), ("client-id", None)], 2.0),
            (&[("user", Some("u"))], 3.0),
            (&[("user", None), ("client-id", Some("c"))], 4.0),
            (&[("user", None), ("client-id", None)], 5.0),
            (&[("user", None)], 6.0),
            (&[("client-id", Some("c"))], 7.0),
            (&[("client-id", None)], 8.0),
        ];
        for dropped in 0..all.len() {
            let table = table(&all[dropped..]);
            assert_eq!(
                produce_limit(&table, "u", "c"),
                Some(all[dropped].1),
                "with the first {dropped} entities removed"
            );
        }
        assert_eq!(produce_limit(&table(&[]), "u", "c"), None);
    }

    #[test]
    fn clients_of_a_default_entity_each_get_their_own_rate_but_a_user_quota_is_shared() {
        let by_client = table(&[(&[("client-id", None)], 8.0)]);
        let (tags, _) = by_client.resolve(ClientQuotaType::Produce, "ANONYMOUS", "a");
        assert_eq!(tags, MetricTags::new("", "a"));
        let by_user = table(&[(&[("user", Some("ANONYMOUS"))], 3.0)]);
        let (a, _) = by_user.resolve(ClientQuotaType::Produce, "ANONYMOUS", "a");
        let (b, _) = by_user.resolve(ClientQuotaType::Produce, "ANONYMOUS", "b");
        assert_eq!(a, b);
        assert_eq!(
            by_user.resolve(ClientQuotaType::Fetch, "ANONYMOUS", "a").1,
            None
        );
    }
}
