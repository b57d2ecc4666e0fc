//! Kafka's RequestMetrics (`kafka.network:type=RequestMetrics`): per request type, a request
//! count and where each request's time went.
//!
//! The stages follow Kafka's RequestChannel: queue time waits for a `queued.max.requests` slot,
//! local time is the handler's own work, remote time is spent parked (purgatory, or Python
//! across the bridge) until the response is complete, send time writes it to the socket.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
};

/// Bucket bounds in milliseconds, from sub-millisecond appends to a long-poll fetch.
const TIME_BUCKETS_MS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
    5000.0, 10000.0, 30000.0,
];
/// One slot per api key Kafka defines (the largest is 92).
const API_KEY_SLOTS: usize = 93;
/// One slot per error code from UNKNOWN_SERVER_ERROR (-1) up (Kafka's largest is below 140).
const ERROR_CODE_SLOTS: usize = 160;

/// When one request reached each stage; the connection owns it while the request is handled.
#[derive(Debug)]
pub struct RequestTimes {
    received: Instant,
    dequeued: Instant,
    parked: OnceLock<Instant>,
}

/// The time one answered request spent in each stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestDurations {
    pub queue: Duration,
    pub local: Duration,
    pub remote: Duration,
    pub send: Duration,
    pub total: Duration,
}

impl RequestTimes {
    /// A request whose frame arrived at `received` and got its queue slot at `dequeued`.
    pub fn new(received: Instant, dequeued: Instant) -> Self {
        RequestTimes {
            received,
            dequeued,
            parked: OnceLock::new(),
        }
    }

    /// The handler starts waiting on something outside the broker; only the first call counts.
    pub fn park(&self) {
        self.parked.get_or_init(Instant::now);
    }

    /// The local time up to `now`: from the queue slot until parked (or `now`).
    pub fn local_until(&self, now: Instant) -> Duration {
        let until = self.parked.get().copied().unwrap_or(now).min(now);
        until.saturating_duration_since(self.dequeued)
    }

    /// The stages of a request whose response was complete at `completed` and written at `sent`.
    pub fn durations(&self, completed: Instant, sent: Instant) -> RequestDurations {
        let parked = self
            .parked
            .get()
            .copied()
            .unwrap_or(completed)
            .min(completed);
        RequestDurations {
            queue: self.dequeued.saturating_duration_since(self.received),
            local: parked.saturating_duration_since(self.dequeued),
            remote: completed.saturating_duration_since(parked),
            send: sent.saturating_duration_since(completed),
            total: sent.saturating_duration_since(self.received),
        }
    }
}

/// One request type's handles, made the first time a request of that type is answered.
struct ApiMetrics {
    requests: IntCounter,
    queue_time: Histogram,
    local_time: Histogram,
    remote_time: Histogram,
    response_send_time: Histogram,
    total_time: Histogram,
}

/// RequestsPerSec and the time histograms, labelled `request` with Kafka's api name.
pub struct RequestMetrics {
    requests: IntCounterVec,
    queue_time: HistogramVec,
    local_time: HistogramVec,
    remote_time: HistogramVec,
    response_send_time: HistogramVec,
    total_time: HistogramVec,
    by_api_key: [OnceLock<ApiMetrics>; API_KEY_SLOTS],
    errors: IntCounterVec,
    /// Per api key, per error code (index code + 1): made on first use.
    errors_by_api_key: [OnceLock<Box<[OnceLock<IntCounter>]>>; API_KEY_SLOTS],
}

fn registered_counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    let counter =
        IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter definition");
    registry
        .register(Box::new(counter.clone()))
        .expect("each request metric is registered once");
    counter
}

fn time_histogram(registry: &Registry, name: &str, help: &str) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(TIME_BUCKETS_MS.to_vec());
    let histogram = HistogramVec::new(opts, &["request"]).expect("a valid histogram definition");
    registry
        .register(Box::new(histogram.clone()))
        .expect("each request metric is registered once");
    histogram
}

impl RequestMetrics {
    pub fn new(registry: &Registry) -> Self {
        RequestMetrics {
            requests: registered_counter(
                registry,
                "kafka_network_requestmetrics_requests_total",
                "Requests answered, by request type (Kafka's RequestsPerSec).",
                &["request"],
            ),
            queue_time: time_histogram(
                registry,
                "kafka_network_requestmetrics_requestqueuetimems",
                "Milliseconds a complete request waited for a queued.max.requests slot.",
            ),
            local_time: time_histogram(
                registry,
                "kafka_network_requestmetrics_localtimems",
                "Milliseconds the broker spent handling a request before it parked or completed.",
            ),
            remote_time: time_histogram(
                registry,
                "kafka_network_requestmetrics_remotetimems",
                "Milliseconds a request waited parked (purgatory, the Python bridge).",
            ),
            response_send_time: time_histogram(
                registry,
                "kafka_network_requestmetrics_responsesendtimems",
                "Milliseconds spent writing a response to the socket.",
            ),
            total_time: time_histogram(
                registry,
                "kafka_network_requestmetrics_totaltimems",
                "Milliseconds from a request's last byte received to its response's last byte sent.",
            ),
            by_api_key: std::array::from_fn(|_| OnceLock::new()),
            errors: registered_counter(
                registry,
                "kafka_network_requestmetrics_errors_total",
                "Partition results of Produce and Fetch, by error (Kafka's ErrorsPerSec).",
                &["request", "error"],
            ),
            errors_by_api_key: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Counts one result of `api_key` answered with `error_code` (0: NONE), as Kafka's
    /// ErrorsPerSec counts each error of a response.
    pub fn record_error(&self, api_key: ApiKey, error_code: i16) {
        let Some(codes) = self.errors_by_api_key.get(api_key as usize) else {
            return;
        };
        let codes = codes.get_or_init(|| (0..ERROR_CODE_SLOTS).map(|_| OnceLock::new()).collect());
        let Some(slot) = usize::try_from(error_code + 1)
            .ok()
            .and_then(|i| codes.get(i))
        else {
            return;
        };
        slot.get_or_init(|| {
            self.errors
                .with_label_values(&[request_name(api_key), error_name(error_code)])
        })
        .inc();
    }

    /// Records one answered request of `api_key` (requests without an answer count too).
    pub fn record(&self, api_key: ApiKey, durations: &RequestDurations) {
        let Some(slot) = self.by_api_key.get(api_key as usize) else {
            return;
        };
        let api = slot.get_or_init(|| self.register_api(api_key));
        api.requests.inc();
        api.queue_time.observe(millis(durations.queue));
        api.local_time.observe(millis(durations.local));
        api.remote_time.observe(millis(durations.remote));
        api.response_send_time.observe(millis(durations.send));
        api.total_time.observe(millis(durations.total));
    }

    fn register_api(&self, api_key: ApiKey) -> ApiMetrics {
        let name = [request_name(api_key)];
        ApiMetrics {
            requests: self.requests.with_label_values(&name),
            queue_time: self.queue_time.with_label_values(&name),
            local_time: self.local_time.with_label_values(&name),
            remote_time: self.remote_time.with_label_values(&name),
            response_send_time: self.response_send_time.with_label_values(&name),
            total_time: self.total_time.with_label_values(&name),
        }
    }
}

/// Kafka's name of an api (`ApiKeys.name`), its `request` tag: Produce, Fetch, ApiVersions, ...
pub fn request_name(api_key: ApiKey) -> String {
    format!("{api_key:?}")
}

/// Kafka's name of an error code (`Errors.name()`): NONE, NOT_LEADER_OR_FOLLOWER, ...
pub fn error_name(error_code: i16) -> String {
    let Some(error) = ResponseError::try_from_code(error_code) else {
        return "NONE".into();
    };
    if let ResponseError::Unknown(code) = error {
        return format!("UNKNOWN_{code}");
    }
    let mut name = String::new();
    for (i, c) in format!("{error:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_parked_request_splits_its_time_into_local_and_remote() {
        let received = Instant::now();
        let times = RequestTimes::new(received, received + ms(2));
        times.parked.set(received + ms(5)).unwrap();
        times.park();
        let durations = times.durations(received + ms(105), received + ms(106));
        assert_eq!(
            durations,
            RequestDurations {
                queue: ms(2),
                local: ms(3),
                remote: ms(100),
                send: ms(1),
                total: ms(106),
            }
        );
    }

    #[test]
    fn a_request_that_never_parked_has_no_remote_time() {
        let received = Instant::now();
        let times = RequestTimes::new(received, received);
        let durations = times.durations(received + ms(7), received + ms(7));
        assert_eq!(durations.local, ms(7));
        assert_eq!(durations.remote, Duration::ZERO);
    }

    #[test]
    fn errors_are_counted_per_request_type_under_kafkas_error_names() {
        let metrics = RequestMetrics::new(&Registry::new());
        metrics.record_error(ApiKey::Produce, 0);
        metrics.record_error(ApiKey::Produce, ResponseError::NotLeaderOrFollower.code());
        metrics.record_error(ApiKey::Produce, ResponseError::NotLeaderOrFollower.code());
        metrics.record_error(ApiKey::Fetch, ResponseError::UnknownServerError.code());
        metrics.record_error(ApiKey::Fetch, 999);
        let count = |api, error| metrics.errors.with_label_values(&[api, error]).get();
        assert_eq!(count("Produce", "NONE"), 1);
        assert_eq!(count("Produce", "NOT_LEADER_OR_FOLLOWER"), 2);
        assert_eq!(count("Fetch", "UNKNOWN_SERVER_ERROR"), 1);
        assert_eq!(error_name(999), "UNKNOWN_999");
        assert_eq!(
            error_name(ResponseError::KafkaStorageError.code()),
            "KAFKA_STORAGE_ERROR"
        );
    }

    #[test]
    fn each_request_type_is_counted_under_its_kafka_name() {
        let registry = Registry::new();
        let metrics = RequestMetrics::new(&registry);
        let received = Instant::now();
        let durations =
            RequestTimes::new(received, received).durations(received + ms(3), received + ms(4));
        metrics.record(ApiKey::Produce, &durations);
        metrics.record(ApiKey::Produce, &durations);
        metrics.record(ApiKey::ApiVersions, &durations);
        let produce = metrics.requests.with_label_values(&["Produce"]);
        assert_eq!(produce.get(), 2);
        assert_eq!(
            metrics.requests.with_label_values(&["ApiVersions"]).get(),
            1
        );
        let total = metrics.total_time.with_label_values(&["Produce"]);
        assert_eq!(total.get_sample_count(), 2);
        assert!((total.get_sample_sum() - 8.0).abs() < 1e-9);
        let local = metrics.local_time.with_label_values(&["Produce"]);
        assert!((local.get_sample_sum() - 6.0).abs() < 1e-9);
    }
}
