//! The broker's view of cluster metadata, replaced whole by the controller after each change.

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

/// An immutable snapshot of the cluster metadata.
#[derive(Debug, Clone, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub controller_id: i32,
    pub metadata_offset: i64,
    pub brokers: BTreeMap<i32, BrokerEndpoint>,
    pub topics: HashMap<String, Arc<TopicMetadata>>,
    topic_names_by_id: HashMap<Uuid, String>,
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
        }
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicMetadata>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicMetadata>> {
        self.topic_names_by_id
            .get(id)
            .and_then(|name| self.topics.get(name))
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
}
