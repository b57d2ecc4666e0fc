//! The replica manager's gauges, read when the metrics endpoint is scraped: Kafka's
//! ReplicaManager PartitionCount and LeaderCount, each log's Size, and the replication quotas'
//! byte rates.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, IntGauge, IntGaugeVec, Opts};

use crate::clock::now_ms;
use crate::metrics::{Scrape, ScrapeSource};
use crate::partition::Partition;
use crate::replica::replica_manager::ReplicaManager;

fn gauge(name: &str, help: &str, value: i64) -> MetricFamily {
    let gauge = IntGauge::new(name, help).expect("a valid gauge definition");
    gauge.set(value);
    gauge.collect().remove(0)
}

fn rate_gauge(name: &str, help: &str, value: f64) -> MetricFamily {
    let gauge = Gauge::new(name, help).expect("a valid gauge definition");
    gauge.set(value);
    gauge.collect().remove(0)
}

impl ScrapeSource for ReplicaManager {
    fn scrape(&self) -> Scrape {
        let hosted = self.hosted_partitions();
        Scrape {
            hosted_topics: hosted
                .iter()
                .map(|p| p.topic_partition.topic.clone())
                .collect(),
            gauges: collect(self, &hosted),
        }
    }
}

/// The gauges as of now.
fn collect(replicas: &ReplicaManager, hosted: &[Arc<Partition>]) -> Vec<MetricFamily> {
    let leaders = hosted.iter().filter(|p| p.is_leader()).count();
    vec![
        gauge(
            "kafka_server_replicamanager_partitioncount",
            "Partitions hosted by this broker (Kafka's PartitionCount).",
            hosted.len() as i64,
        ),
        gauge(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads (Kafka's LeaderCount).",
            leaders as i64,
        ),
        log_sizes(replicas),
        rate_gauge(
            "kafka_server_leaderreplication_byte_rate",
            "Bytes/s a leader sent of throttled replicas (Kafka's LeaderReplication byte-rate).",
            replicas.replication_quotas().leader.byte_rate(now_ms()),
        ),
        rate_gauge(
            "kafka_server_followerreplication_byte_rate",
            "Bytes/s a follower fetched of throttled replicas (Kafka's FollowerReplication \
             byte-rate).",
            replicas.replication_quotas().follower.byte_rate(now_ms()),
        ),
    ]
}

/// Kafka's `kafka.log:type=Log,name=Size` for every log this broker holds.
fn log_sizes(replicas: &ReplicaManager) -> MetricFamily {
    let sizes = IntGaugeVec::new(
        Opts::new(
            "kafka_log_log_size",
            "Bytes of a partition's log segments on disk (Kafka's Log Size).",
        ),
        &["topic", "partition"],
    )
    .expect("a valid gauge definition");
    let logs = replicas.log_manager();
    for tp in logs.all_partitions() {
        if let Some(log) = logs.get(&tp) {
            let size = log.lock().size_in_bytes();
            sizes
                .with_label_values(&[tp.topic.as_str(), &tp.partition.to_string()])
                .set(i64::try_from(size).unwrap_or(i64::MAX));
        }
    }
    sizes.collect().remove(0)
}
