//! Kafka's BrokerTopicMetrics (`kafka.server:type=BrokerTopicMetrics`): bytes and messages in,
//! bytes out, produce and fetch counts, each for all topics (no `topic` label) and per topic.
//!
//! A handler asks for a topic's `TopicMetrics` once per hosted partition (the partition caches
//! it), so recording is a few atomic adds with no lookup.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntCounterVec, Opts};

/// One of Kafka's topic meters: the all-topics series and the per-topic family.
struct Meter {
    all_topics: IntCounter,
    per_topic: IntCounterVec,
}

impl Meter {
    fn new(name: &str, help: &str) -> Self {
        let opts = Opts::new(name, help);
        Meter {
            all_topics: IntCounter::with_opts(opts.clone()).expect("a valid counter definition"),
            per_topic: IntCounterVec::new(opts, &["topic"]).expect("a valid counter definition"),
        }
    }

    /// One family holding the all-topics series and every hosted topic's, as Kafka's JMX
    /// exporter shows them (a registry would refuse one name with two label sets). The series
    /// of a topic no longer hosted are dropped, as Kafka removes a deleted topic's metrics.
    fn collect(&self, hosted: &HashSet<&str>) -> MetricFamily {
        let mut family = self.all_topics.collect().remove(0);
        for mut topics in self.per_topic.collect() {
            for metric in topics.take_metric() {
                let topic = metric.get_label().first().map_or("", |label| label.value());
                if hosted.contains(topic) {
                    family.mut_metric().push(metric);
                } else {
                    let _ = self.per_topic.remove_label_values(&[topic]);
                }
            }
        }
        family
    }
}

/// Handles of one topic's series; increments go to the all-topics series too.
#[derive(Clone)]
pub struct TopicMetrics {
    bytes_in: (IntCounter, IntCounter),
    bytes_out: (IntCounter, IntCounter),
    messages_in: (IntCounter, IntCounter),
    total_produce_requests: (IntCounter, IntCounter),
    total_fetch_requests: (IntCounter, IntCounter),
    failed_produce_requests: (IntCounter, IntCounter),
    failed_fetch_requests: (IntCounter, IntCounter),
}

fn add(pair: &(IntCounter, IntCounter), n: u64) {
    pair.0.inc_by(n);
    pair.1.inc_by(n);
}

/// Errors Kafka's ReplicaManager answers without marking a failed produce: the request was
/// for the wrong broker or the records were refused as a whole (appendToLocalLog).
const EXPECTED_PRODUCE_ERRORS: &[ResponseError] = &[
    ResponseError::UnknownTopicOrPartition,
    ResponseError::NotLeaderOrFollower,
    ResponseError::MessageTooLarge,
    ResponseError::RecordListTooLarge,
    ResponseError::CorruptMessage,
    ResponseError::KafkaStorageError,
];
/// Errors Kafka's ReplicaManager answers without marking a failed fetch (readFromLog).
const EXPECTED_FETCH_ERRORS: &[ResponseError] = &[
    ResponseError::UnknownTopicOrPartition,
    ResponseError::UnknownTopicId,
    ResponseError::NotLeaderOrFollower,
    ResponseError::UnknownLeaderEpoch,
    ResponseError::FencedLeaderEpoch,
    ResponseError::ReplicaNotAvailable,
    ResponseError::KafkaStorageError,
    ResponseError::InconsistentTopicId,
    ResponseError::OffsetOutOfRange,
];

fn is_failure(error_code: i16, expected: &[ResponseError]) -> bool {
    error_code != 0 && !expected.iter().any(|e| e.code() == error_code)
}

impl TopicMetrics {
    /// A produce to one partition of this topic appended `bytes` holding `messages` records,
    /// or was answered `error_code`.
    pub fn record_produce(&self, error_code: i16, bytes: u64, messages: u64) {
        add(&self.total_produce_requests, 1);
        if is_failure(error_code, EXPECTED_PRODUCE_ERRORS) {
            add(&self.failed_produce_requests, 1);
        }
        add(&self.bytes_in, bytes);
        add(&self.messages_in, messages);
    }

    /// A fetch from one partition of this topic returned `bytes` of records or `error_code`.
    pub fn record_fetch(&self, error_code: i16, bytes: u64) {
        add(&self.total_fetch_requests, 1);
        if is_failure(error_code, EXPECTED_FETCH_ERRORS) {
            add(&self.failed_fetch_requests, 1);
        }
        add(&self.bytes_out, bytes);
    }
}

/// The seven meters, all-topics and per topic.
pub struct BrokerTopicMetrics {
    bytes_in: Meter,
    bytes_out: Meter,
    messages_in: Meter,
    total_produce_requests: Meter,
    total_fetch_requests: Meter,
    failed_produce_requests: Meter,
    failed_fetch_requests: Meter,
}

impl Default for BrokerTopicMetrics {
    fn default() -> Self {
        BrokerTopicMetrics {
            bytes_in: Meter::new(
                "kafka_server_brokertopicmetrics_bytesin_total",
                "Record bytes appended by producers (Kafka's BytesInPerSec).",
            ),
            bytes_out: Meter::new(
                "kafka_server_brokertopicmetrics_bytesout_total",
                "Record bytes returned to fetchers (Kafka's BytesOutPerSec).",
            ),
            messages_in: Meter::new(
                "kafka_server_brokertopicmetrics_messagesin_total",
                "Records appended by producers (Kafka's MessagesInPerSec).",
            ),
            total_produce_requests: Meter::new(
                "kafka_server_brokertopicmetrics_totalproducerequests_total",
                "Partition appends requested by producers (Kafka's TotalProduceRequestsPerSec).",
            ),
            total_fetch_requests: Meter::new(
                "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                "Partition reads requested by fetchers (Kafka's TotalFetchRequestsPerSec).",
            ),
            failed_produce_requests: Meter::new(
                "kafka_server_brokertopicmetrics_failedproducerequests_total",
                "Partition appends that failed (Kafka's FailedProduceRequestsPerSec).",
            ),
            failed_fetch_requests: Meter::new(
                "kafka_server_brokertopicmetrics_failedfetchrequests_total",
                "Partition reads that failed (Kafka's FailedFetchRequestsPerSec).",
            ),
        }
    }
}

impl BrokerTopicMetrics {
    /// Handles of `topic`'s series (created on first use); look them up once, not per request.
    pub fn topic(&self, topic: &str) -> TopicMetrics {
        let pair = |meter: &Meter| {
            (
                meter.all_topics.clone(),
                meter.per_topic.with_label_values(&[topic]),
            )
        };
        TopicMetrics {
            bytes_in: pair(&self.bytes_in),
            bytes_out: pair(&self.bytes_out),
            messages_in: pair(&self.messages_in),
            total_produce_requests: pair(&self.total_produce_requests),
            total_fetch_requests: pair(&self.total_fetch_requests),
            failed_produce_requests: pair(&self.failed_produce_requests),
            failed_fetch_requests: pair(&self.failed_fetch_requests),
        }
    }

    /// A produce refused before it reached a partition led here (unknown topic, not the
    /// leader, an internal topic): counted for all topics only, so made-up topic names cannot
    /// grow the label set. Like Kafka, not as failed.
    pub fn record_refused_produce(&self) {
        self.total_produce_requests.all_topics.inc();
    }

    /// A fetch refused before it reached a partition led here (all topics only, not failed).
    pub fn record_refused_fetch(&self) {
        self.total_fetch_requests.all_topics.inc();
    }

    /// The seven families; `hosted` are the topics with a partition on this broker.
    pub fn collect(&self, hosted: &HashSet<&str>) -> Vec<MetricFamily> {
        [
            &self.bytes_in,
            &self.bytes_out,
            &self.messages_in,
            &self.total_produce_requests,
            &self.total_fetch_requests,
            &self.failed_produce_requests,
            &self.failed_fetch_requests,
        ]
        .into_iter()
        .map(|meter| meter.collect(hosted))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use prometheus::{Encoder, TextEncoder};

    use super::*;

    fn render(metrics: &BrokerTopicMetrics, hosted: &[&str]) -> String {
        let hosted = hosted.iter().copied().collect();
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&metrics.collect(&hosted), &mut text)
            .unwrap();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn appends_count_for_their_topic_and_for_all_topics() {
        let metrics = BrokerTopicMetrics::default();
        let orders = metrics.topic("orders");
        orders.record_produce(0, 700, 10);
        orders.record_produce(0, 300, 5);
        metrics.topic("audit").record_produce(0, 50, 1);
        metrics.record_refused_produce();
        let text = render(&metrics, &["orders", "audit"]);
        for line in [
            "kafka_server_brokertopicmetrics_bytesin_total 1050",
            "kafka_server_brokertopicmetrics_bytesin_total{topic=\"orders\"} 1000",
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"audit\"} 1",
            "kafka_server_brokertopicmetrics_messagesin_total 16",
            "kafka_server_brokertopicmetrics_totalproducerequests_total 4",
            "kafka_server_brokertopicmetrics_totalproducerequests_total{topic=\"orders\"} 2",
            "kafka_server_brokertopicmetrics_failedproducerequests_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert_eq!(
            text.matches("# TYPE kafka_server_brokertopicmetrics_bytesin_total counter")
                .count(),
            1
        );
    }

    #[test]
    fn a_topic_no_longer_hosted_loses_its_series_but_not_its_share_of_the_total() {
        let metrics = BrokerTopicMetrics::default();
        metrics.topic("gone").record_produce(0, 100, 2);
        metrics.topic("kept").record_produce(0, 10, 1);
        let text = render(&metrics, &["kept"]);
        assert!(!text.contains("gone"), "{text}");
        assert!(text.contains("kafka_server_brokertopicmetrics_bytesin_total 110\n"));
        assert!(text.contains("kafka_server_brokertopicmetrics_bytesin_total{topic=\"kept\"} 10\n"));
        let recreated = render(&metrics, &["gone", "kept"]);
        assert!(!recreated.contains("gone"), "{recreated}");
    }

    #[test]
    fn only_unexpected_errors_count_as_failed_as_in_kafka() {
        let metrics = BrokerTopicMetrics::default();
        let topic = metrics.topic("t");
        topic.record_produce(ResponseError::NotLeaderOrFollower.code(), 0, 0);
        topic.record_produce(ResponseError::InvalidTimestamp.code(), 0, 0);
        topic.record_fetch(ResponseError::OffsetOutOfRange.code(), 0);
        topic.record_fetch(ResponseError::UnknownServerError.code(), 0);
        topic.record_fetch(0, 4096);
        assert_eq!(topic.failed_produce_requests.1.get(), 1);
        assert_eq!(topic.total_produce_requests.1.get(), 2);
        assert_eq!(topic.failed_fetch_requests.0.get(), 1);
        assert_eq!(topic.total_fetch_requests.0.get(), 3);
        assert_eq!(topic.bytes_out.1.get(), 4096);
    }
}
