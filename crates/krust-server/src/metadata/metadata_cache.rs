//! The broker's view of cluster metadata: the controller installs the full image once at
//! start-up, then applies one `MetadataDelta` per committed change (Kafka's MetadataDelta),
//! copying only the topics it names.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

/// A broker as clients should reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Its address on each listener, by listener name (clients are told the address of the
    /// listener they came in on, as Kafka does); `host`/`port` are the first listener's.
    pub listeners: HashMap<String, (String, i32)>,
}

impl BrokerEndpoint {
    /// The address to give a client of `listener` (the first listener's when it has none).
    pub fn address_for(&self, listener: &str) -> (&str, i32) {
        match self.listeners.get(listener) {
            Some((host, port)) => (host, *port),
            None => (&self.host, self.port),
        }
    }
}

/// One partition's placement and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// One topic with its id, topic-level config overrides and partitions (indexed by partition id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    pub topic_id: Uuid,
    pub internal: bool,
    pub configs: HashMap<String, String>,
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    pub fn partition(&self, index: i32) -> Option<&PartitionMetadata> {
        self.partitions
            .binary_search_by_key(&index, |p| p.partition)
            .ok()
            .map(|i| &self.partitions[i])
    }

    /// This topic with `changes` (new or changed partitions) merged in, in partition order.
    fn with_partitions(&self, changes: &[PartitionMetadata]) -> Vec<PartitionMetadata> {
        let mut partitions = self.partitions.clone();
        for change in changes {
            match partitions.binary_search_by_key(&change.partition, |p| p.partition) {
                Ok(i) => partitions[i] = change.clone(),
                Err(i) => partitions.insert(i, change.clone()),
            }
        }
        partitions
    }
}

/// One committed change, as the broker applies it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    pub metadata_offset: i64,
    pub controller_id: i32,
    /// Every registered, unfenced broker, when any of them changed.
    pub brokers: Option<Vec<BrokerEndpoint>>,
    /// Created or changed topics, each with its full configs but only its new or changed
    /// partitions.
    pub topics: Vec<TopicMetadata>,
    pub deleted_topic_ids: Vec<Uuid>,
    /// Every finalized feature level, when a FeatureLevelRecord changed any of them.
    pub finalized_features: Option<BTreeMap<String, i16>>,
    /// When a dynamic broker config changed: every topic config's broker default, by topic key
    /// name; hosted partitions without an override take them.
    pub log_defaults: Option<HashMap<String, String>>,
}

/// A feature's version range this broker supports (Kafka's SupportedVersionRange).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedVersionRange {
    pub min: i16,
    pub max: i16,
}

/// A snapshot of the cluster metadata; the cache never changes one a reader holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub controller_id: i32,
    pub metadata_offset: i64,
    pub brokers: BTreeMap<i32, BrokerEndpoint>,
    pub topics: HashMap<String, Arc<TopicMetadata>>,
    topic_names_by_id: HashMap<Uuid, String>,
    /// The features this broker supports, from its own registration (ApiVersions v3+).
    pub supported_features: BTreeMap<String, SupportedVersionRange>,
    /// The cluster's finalized feature levels (FeatureLevelRecords; KIP-584).
    pub finalized_features: BTreeMap<String, i16>,
}

impl MetadataImage {
    /// Builds an image, indexing topics by name and by id.
    pub fn new(
        cluster_id: String,
        controller_id: i32,
        metadata_offset: i64,
        brokers: Vec<BrokerEndpoint>,
        topics: Vec<TopicMetadata>,
    ) -> Self {
        let topic_names_by_id = topics
            .iter()
            .map(|t| (t.topic_id, t.name.clone()))
            .collect();
        MetadataImage {
            cluster_id,
            controller_id,
            metadata_offset,
            brokers: brokers.into_iter().map(|b| (b.node_id, b)).collect(),
            topics: topics
                .into_iter()
                .map(|t| (t.name.clone(), Arc::new(t)))
                .collect(),
            topic_names_by_id,
            supported_features: BTreeMap::new(),
            finalized_features: BTreeMap::new(),
        }
    }

    /// This image with the broker's supported features and the finalized levels.
    pub fn with_features(
        mut self,
        supported: BTreeMap<String, SupportedVersionRange>,
        finalized: BTreeMap<String, i16>,
    ) -> Self {
        self.supported_features = supported;
        self.finalized_features = finalized;
        self
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicMetadata>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicMetadata>> {
        self.topic_names_by_id
            .get(id)
            .and_then(|name| self.topics.get(name))
    }

    /// Applies `delta`: only the topics it names are copied.
    pub fn apply_delta(&mut self, delta: &MetadataDelta) {
        self.metadata_offset = delta.metadata_offset;
        self.controller_id = delta.controller_id;
        if let Some(brokers) = &delta.brokers {
            self.brokers = brokers.iter().map(|b| (b.node_id, b.clone())).collect();
        }
        if let Some(finalized) = &delta.finalized_features {
            self.finalized_features = finalized.clone();
        }
        for id in &delta.deleted_topic_ids {
            if let Some(name) = self.topic_names_by_id.remove(id) {
                self.topics.remove(&name);
            }
        }
        for change in &delta.topics {
            let partitions = match self.topics.get(&change.name) {
                Some(current) if current.topic_id == change.topic_id => {
                    current.with_partitions(&change.partitions)
                }
                _ => change.partitions.clone(),
            };
            let topic = TopicMetadata {
                name: change.name.clone(),
                topic_id: change.topic_id,
                internal: change.internal,
                configs: change.configs.clone(),
                partitions,
            };
            self.topic_names_by_id
                .insert(topic.topic_id, topic.name.clone());
            self.topics.insert(topic.name.clone(), Arc::new(topic));
        }
    }
}

/// Shared, swappable holder of the current image; readers take a cheap `Arc` snapshot.
#[derive(Default)]
pub struct MetadataCache {
    current: RwLock<Arc<MetadataImage>>,
}

impl MetadataCache {
    pub fn image(&self) -> Arc<MetadataImage> {
        self.current.read().clone()
    }

    pub fn replace(&self, image: MetadataImage) {
        *self.current.write() = Arc::new(image);
    }

    /// Applies `delta` in place when no request holds the current image; otherwise the topic
    /// map is copied (names and pointers, never the topics' partitions).
    pub fn apply_delta(&self, delta: &MetadataDelta) {
        let mut current = self.current.write();
        Arc::make_mut(&mut current).apply_delta(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_given_the_address_of_its_own_listener() {
        let broker = BrokerEndpoint {
            node_id: 1,
            host: "plain.test".into(),
            port: 9092,
            rack: None,
            listeners: HashMap::from([("SASL_SSL".to_string(), ("tls.test".to_string(), 9094))]),
        };
        assert_eq!(broker.address_for("SASL_SSL"), ("tls.test", 9094));
        assert_eq!(broker.address_for("PLAINTEXT"), ("plain.test", 9092));
        assert_eq!(broker.address_for("krust-internal"), ("plain.test", 9092));
    }
}
