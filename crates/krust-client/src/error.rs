//! Typed errors of the client, each saying which broker, topic or partition failed and how.

use kafka_protocol::error::ResponseError;
use krust_storage::BatchError;
use krust_wire::WireError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("no bootstrap server given (kafka.bootstrap.servers is empty)")]
    NoBootstrapServers,
    /// Connecting, TLS, SASL, or a request's round trip (krust-wire).
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("broker {0} is in no metadata response")]
    UnknownBroker(i32),
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("partition {partition} of topic {topic} does not exist")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("partition {partition} of topic {topic} has no leader")]
    NoLeader { topic: String, partition: i32 },
    #[error("{api} for {topic}-{partition} failed: {error:?} (Kafka error code {})", error.code())]
    Kafka {
        api: &'static str,
        topic: String,
        partition: i32,
        error: ResponseError,
    },
    #[error("{api} for topic {topic} failed: {error:?} (Kafka error code {})", error.code())]
    Topic {
        api: &'static str,
        topic: String,
        error: ResponseError,
    },
    #[error("{api} failed: {error:?} (Kafka error code {})", error.code())]
    KafkaCluster {
        api: &'static str,
        error: ResponseError,
    },
    #[error(
        "offsets [{start}, {end}) of {topic}-{partition} are no longer all in the log: the \
         log now starts at {log_start_offset} (removed by retention or DeleteRecords)"
    )]
    DataLoss {
        topic: String,
        partition: i32,
        start: i64,
        end: i64,
        log_start_offset: i64,
    },
    #[error("{topic}-{partition} ends at offset {high_watermark}, before the requested end {end}")]
    RangePastEnd {
        topic: String,
        partition: i32,
        end: i64,
        high_watermark: i64,
    },
    #[error("a record batch of {topic}-{partition} is corrupt: {source}")]
    CorruptBatch {
        topic: String,
        partition: i32,
        source: BatchError,
    },
    #[error("the rows to produce are not usable: {0}")]
    InvalidRows(String),
    #[error("producing to {topic}-{partition} failed: {message}")]
    ProduceRejected {
        topic: String,
        partition: i32,
        message: String,
    },
    #[error("{api} for {target} failed: {error:?} (Kafka error code {})", error.code())]
    Transaction {
        api: &'static str,
        /// The transactional id, group or partition the request was about.
        target: String,
        error: ResponseError,
    },
    #[error("no transaction: init_transactions was not called")]
    NoTransaction,
    #[error("gave up on {target} after {attempts} attempts in {elapsed_ms} ms: {last}")]
    RetriesExhausted {
        /// What was asked for: a topic partition, or the producer id.
        target: String,
        attempts: u32,
        elapsed_ms: u128,
        last: Box<ClientError>,
    },
}

impl ClientError {
    /// Whether refreshing metadata and trying again may succeed (a moved leader, a broker
    /// that is starting, a connection that broke).
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Wire(error) => error.is_retriable(),
            Self::NoLeader { .. } => true,
            // Kafka's producer retries a transaction request that met another one in flight.
            Self::Transaction {
                error: ResponseError::ConcurrentTransactions,
                ..
            } => true,
            Self::Transaction { error, .. } => error.is_retriable(),
            Self::Kafka { error, .. }
            | Self::Topic { error, .. }
            | Self::KafkaCluster { error, .. } => error.is_retriable(),
            _ => false,
        }
    }
}
