//! Kafka's broker metrics in Prometheus' text format; docs/metrics.md maps every name to
//! Kafka's JMX name. The gauges of the state they report on are that state's own
//! (`replica::replica_manager::gauges`).
//!
//! The request path records through handles registered once (per api key, per topic) with
//! atomic adds only; gauges (partition count, log sizes, the cleaner's backlog) are read when
//! the endpoint is scraped, so they cost nothing between scrapes.

pub mod endpoint;
mod request_metrics;
mod topic_metrics;

use parking_lot::RwLock;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Encoder, IntGauge, Registry, TextEncoder};

pub use request_metrics::{RequestDurations, RequestMetrics, RequestTimes};
pub use topic_metrics::{BrokerTopicMetrics, TopicMetrics};

/// Reports the log cleaner's backlog at scrape time: the bytes of compacted logs written since
/// they were last cleaned (see `BrokerMetrics::set_cleaner_backlog`).
pub type CleanerBacklog = Box<dyn Fn() -> u64 + Send + Sync>;

/// What the broker's state reports when the endpoint is scraped. The replica manager owns its
/// gauges (as Kafka's ReplicaManager registers PartitionCount and LeaderCount itself), so the
/// metrics do not depend on the state they report.
pub trait ScrapeSource: Send + Sync {
    /// The hosted topics and the gauges, read now.
    fn scrape(&self) -> Scrape;
}

/// One scrape of the broker's state.
pub struct Scrape {
    /// The topics hosted now: only these report per-topic metrics.
    pub hosted_topics: Vec<String>,
    pub gauges: Vec<MetricFamily>,
}

/// Every metric the broker exports.
pub struct BrokerMetrics {
    registry: Registry,
    pub requests: RequestMetrics,
    pub topics: BrokerTopicMetrics,
    cleaner_backlog: RwLock<Option<CleanerBacklog>>,
    /// What clients pushed (KIP-714), rendered by Python's client metrics service.
    client_telemetry: RwLock<String>,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        let registry = Registry::new();
        BrokerMetrics {
            requests: RequestMetrics::new(&registry),
            topics: BrokerTopicMetrics::default(),
            registry,
            cleaner_backlog: RwLock::default(),
            client_telemetry: RwLock::default(),
        }
    }
}

impl BrokerMetrics {
    /// The log cleaner plugs in here: from then on every scrape reports `backlog()` as
    /// `kafka_log_logcleanermanager_backlog_bytes` (absent while no cleaner is set).
    pub fn set_cleaner_backlog(&self, backlog: CleanerBacklog) {
        *self.cleaner_backlog.write() = Some(backlog);
    }

    /// The client metrics clients pushed, as Prometheus text whose names cannot collide with
    /// the broker's own (`kafka_client_telemetry_...`): appended to every scrape.
    pub fn set_client_telemetry(&self, text: String) {
        *self.client_telemetry.write() = text;
    }

    /// Every metric family, the gauges read from `gauges` now.
    pub fn gather(&self, gauges: &dyn ScrapeSource) -> Vec<MetricFamily> {
        let scrape = gauges.scrape();
        let topics = scrape.hosted_topics.iter().map(String::as_str).collect();
        let mut families = self.registry.gather();
        families.extend(self.topics.collect(&topics));
        families.extend(scrape.gauges);
        if let Some(backlog) = self.cleaner_backlog.read().as_deref() {
            let gauge = IntGauge::new(
                "kafka_log_logcleanermanager_backlog_bytes",
                "Bytes of compacted logs written since they were last cleaned.",
            )
            .expect("a valid gauge definition");
            gauge.set(i64::try_from(backlog()).unwrap_or(i64::MAX));
            families.extend(gauge.collect());
        }
        families
    }

    /// Every metric in Prometheus' text exposition format (version 0.0.4).
    pub fn render(&self, gauges: &dyn ScrapeSource) -> String {
        let mut text = Vec::new();
        // Encoding into memory fails only for a malformed family, which the names here are not.
        if let Err(error) = TextEncoder::new().encode(&self.gather(gauges), &mut text) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        let mut text = String::from_utf8_lossy(&text).into_owned();
        text.push_str(&self.client_telemetry.read());
        text
    }
}
