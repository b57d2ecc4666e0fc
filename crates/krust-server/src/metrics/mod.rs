//! Kafka's broker metrics in Prometheus' text format; docs/metrics.md maps every name to
//! Kafka's JMX name.
//!
//! The request path records through handles registered once (per api key, per topic) with
//! atomic adds only; gauges (partition count, log sizes, the cleaner's backlog) are read when
//! the endpoint is scraped, so they cost nothing between scrapes.

pub mod endpoint;
mod request_metrics;
mod scrape_gauges;
mod topic_metrics;

use parking_lot::RwLock;
use prometheus::proto::MetricFamily;
use prometheus::{Encoder, Registry, TextEncoder};

pub use request_metrics::{RequestDurations, RequestMetrics, RequestTimes};
pub use topic_metrics::{BrokerTopicMetrics, TopicMetrics};

use crate::replica::replica_manager::ReplicaManager;

/// Reports the log cleaner's backlog at scrape time: the bytes of compacted logs written since
/// they were last cleaned (see `BrokerMetrics::set_cleaner_backlog`).
pub type CleanerBacklog = Box<dyn Fn() -> u64 + Send + Sync>;

/// Every metric the broker exports.
pub struct BrokerMetrics {
    registry: Registry,
    pub requests: RequestMetrics,
    pub topics: BrokerTopicMetrics,
    cleaner_backlog: RwLock<Option<CleanerBacklog>>,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        let registry = Registry::new();
        BrokerMetrics {
            requests: RequestMetrics::new(&registry),
            topics: BrokerTopicMetrics::default(),
            registry,
            cleaner_backlog: RwLock::default(),
        }
    }
}

impl BrokerMetrics {
    /// The log cleaner plugs in here: from then on every scrape reports `backlog()` as
    /// `kafka_log_logcleanermanager_backlog_bytes` (absent while no cleaner is set).
    pub fn set_cleaner_backlog(&self, backlog: CleanerBacklog) {
        *self.cleaner_backlog.write() = Some(backlog);
    }

    /// Every metric family, the gauges read from `replicas` now.
    pub fn gather(&self, replicas: &ReplicaManager) -> Vec<MetricFamily> {
        let hosted = replicas.hosted_partitions();
        let topics = hosted
            .iter()
            .map(|p| p.topic_partition.topic.as_str())
            .collect();
        let mut families = self.registry.gather();
        families.extend(self.topics.collect(&topics));
        families.extend(scrape_gauges::collect(
            replicas,
            &hosted,
            self.cleaner_backlog.read().as_deref(),
        ));
        families
    }

    /// Every metric in Prometheus' text exposition format (version 0.0.4).
    pub fn render(&self, replicas: &ReplicaManager) -> String {
        let mut text = Vec::new();
        // Encoding into memory fails only for a malformed family, which the names here are not.
        if let Err(error) = TextEncoder::new().encode(&self.gather(replicas), &mut text) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}
