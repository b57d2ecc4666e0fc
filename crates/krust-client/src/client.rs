//! Bootstrap, cluster metadata and one connection per broker.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use krust_wire::{BlockingConnection as Connection, ConnectionConfig};

use crate::error::ClientError;
use crate::{SecurityConfig, SecurityConfigError};

/// Metadata v12: topic names (v10+ adds topic ids, v13 only a top-level error code).
const METADATA_VERSION: i16 = 12;
/// The first pause before another attempt, doubled each time up to the max (Kafka's
/// `retry.backoff.ms` and `retry.backoff.max.ms` defaults, KIP-580).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What a client needs to reach the cluster.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `bootstrap.servers`: `host:port` entries.
    pub bootstrap_servers: Vec<String>,
    pub client_id: String,
    /// `request.timeout.ms`: connect, send and receive each give up after this.
    pub request_timeout: Duration,
    /// `security.protocol`, `ssl.*`, `sasl.*`: used for every connection, to bootstrap
    /// servers and partition leaders alike.
    pub security: Arc<SecurityConfig>,
}

impl ClientConfig {
    /// A config from Kafka's comma-separated `bootstrap.servers` form.
    pub fn new(bootstrap_servers: &str) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            client_id: "krust-spark".to_string(),
            request_timeout: Duration::from_secs(30),
            security: Arc::default(),
        }
    }

    /// A config with the security settings of `properties` (Kafka client keys).
    pub fn with_properties(
        bootstrap_servers: &str,
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, SecurityConfigError> {
        Ok(Self {
            security: Arc::new(SecurityConfig::from_properties(properties)?),
            ..Self::new(bootstrap_servers)
        })
    }

    /// What each of the client's connections is opened with.
    pub fn connection_config(&self) -> Arc<ConnectionConfig> {
        Arc::new(
            ConnectionConfig::new(self.client_id.clone())
                .with_request_timeout(self.request_timeout)
                .with_security(Arc::clone(&self.security)),
        )
    }
}

/// The idempotent producer's identity and next sequence per partition (KIP-98).
#[derive(Default)]
pub(crate) struct ProducerState {
    pub(crate) id: Option<(i64, i16)>,
    pub(crate) sequences: HashMap<(String, i32), i32>,
    /// Picks the partition of records without a key (modulo each topic's partition count):
    /// Kafka's sticky partitioner keeps one partition for a whole batch, this keeps it for a
    /// whole call and moves on at the next.
    pub(crate) sticky: usize,
    /// Set by `init_transactions`: every record is then written in a transaction.
    pub(crate) transaction: Option<crate::transaction_state::TransactionState>,
}

/// One partition as the last metadata response described it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    /// -1 while the partition has no leader.
    pub leader: i32,
}

pub struct KafkaClient {
    config: ClientConfig,
    /// Node id -> `host:port`, from the last metadata response.
    brokers: HashMap<i32, String>,
    /// Topic -> its partitions, from the last metadata response that named it.
    topics: HashMap<String, Vec<PartitionInfo>>,
    connections: HashMap<i32, Connection>,
    bootstrap: Option<Connection>,
    pub(crate) producer: ProducerState,
}

impl KafkaClient {
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        if config.bootstrap_servers.is_empty() {
            return Err(ClientError::NoBootstrapServers);
        }
        Ok(Self {
            config,
            brokers: HashMap::new(),
            topics: HashMap::new(),
            connections: HashMap::new(),
            bootstrap: None,
            producer: ProducerState::default(),
        })
    }

    /// Every topic in the cluster with its partitions (internal topics left out).
    pub fn all_topics(&mut self) -> Result<BTreeMap<String, Vec<PartitionInfo>>, ClientError> {
        self.refresh(None, false)
    }

    /// The partitions of `topic`, from fresh metadata.
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<PartitionInfo>, ClientError> {
        self.described(topic, false)
    }

    /// The partitions of `topic`, which the broker creates first if it is missing and
    /// `auto.create.topics.enable` allows, as a producer's metadata request asks. A topic
    /// just created has no leader for a moment, so this retries.
    pub(crate) fn partitions_creating(
        &mut self,
        topic: &str,
    ) -> Result<Vec<PartitionInfo>, ClientError> {
        self.with_retries(
            topic,
            || topic.to_string(),
            |client| {
                let partitions = client.described(topic, true)?;
                if let Some(leaderless) = partitions.iter().find(|p| p.leader < 0) {
                    return Err(ClientError::NoLeader {
                        topic: topic.to_string(),
                        partition: leaderless.partition,
                    });
                }
                Ok(partitions)
            },
        )
    }

    fn described(
        &mut self,
        topic: &str,
        auto_create: bool,
    ) -> Result<Vec<PartitionInfo>, ClientError> {
        let mut answered = self.refresh(Some(&[topic.to_string()]), auto_create)?;
        answered
            .remove(topic)
            .ok_or_else(|| ClientError::UnknownTopic(topic.to_string()))
    }

    /// The leader of `topic`-`partition`, from cached metadata (fetched if missing).
    pub(crate) fn leader(&mut self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        if !self.topics.contains_key(topic) {
            self.partitions(topic)?;
        }
        let info = self.topics[topic]
            .iter()
            .find(|p| p.partition == partition)
            .ok_or_else(|| ClientError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
        if info.leader < 0 {
            return Err(ClientError::NoLeader {
                topic: topic.to_string(),
                partition,
            });
        }
        Ok(info.leader)
    }

    /// How many partitions `topic` had in the last metadata that named it (0 if none did).
    pub(crate) fn known_partitions(&self, topic: &str) -> usize {
        self.topics.get(topic).map_or(0, Vec::len)
    }

    /// Drops what is known about `topic` and the connections, after an error that says the
    /// metadata or a connection is stale.
    pub(crate) fn invalidate(&mut self, topic: &str) {
        self.topics.remove(topic);
        self.connections.clear();
    }

    /// The connection to broker `node_id`, opened if needed.
    pub(crate) fn connection(&mut self, node_id: i32) -> Result<&mut Connection, ClientError> {
        if !self.connections.contains_key(&node_id) {
            let address = self
                .brokers
                .get(&node_id)
                .ok_or(ClientError::UnknownBroker(node_id))?;
            let connection = Connection::connect(address, self.config.connection_config())?;
            self.connections.insert(node_id, connection);
        }
        Ok(self
            .connections
            .get_mut(&node_id)
            .expect("inserted above when missing"))
    }

    /// Records the address of broker `node_id` (a coordinator FindCoordinator named).
    pub(crate) fn add_broker(&mut self, node_id: i32, address: String) {
        if self.brokers.get(&node_id) != Some(&address) {
            self.connections.remove(&node_id);
            self.brokers.insert(node_id, address);
        }
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    /// Asks for metadata of `topics` (all when `None`) and caches brokers and leaders.
    fn refresh(
        &mut self,
        topics: Option<&[String]>,
        auto_create: bool,
    ) -> Result<BTreeMap<String, Vec<PartitionInfo>>, ClientError> {
        let request = MetadataRequest::default()
            .with_allow_auto_topic_creation(auto_create)
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|name| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                    })
                    .collect()
            }));
        let response = match self
            .bootstrap_connection()?
            .send(&request, METADATA_VERSION)
        {
            Ok(response) => response,
            Err(e) => {
                self.bootstrap = None;
                return Err(e.into());
            }
        };
        self.brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut answered = BTreeMap::new();
        for topic in response.topics {
            let Some(name) = topic.name else { continue };
            let name = name.0.to_string();
            match ResponseError::try_from_code(topic.error_code) {
                None => {}
                Some(ResponseError::UnknownTopicOrPartition) => continue,
                Some(error) => {
                    return Err(ClientError::Topic {
                        api: "Metadata",
                        topic: name,
                        error,
                    })
                }
            }
            if topic.is_internal && topics.is_none() {
                continue;
            }
            let mut partitions: Vec<PartitionInfo> = topic
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            self.topics.insert(name.clone(), partitions.clone());
            answered.insert(name, partitions);
        }
        Ok(answered)
    }

    /// A connection to any bootstrap server that answers.
    pub(crate) fn bootstrap_connection(&mut self) -> Result<&mut Connection, ClientError> {
        if self.bootstrap.is_none() {
            let mut last = None;
            for address in &self.config.bootstrap_servers {
                match Connection::connect(address, self.config.connection_config()) {
                    Ok(connection) => {
                        self.bootstrap = Some(connection);
                        break;
                    }
                    Err(e) => last = Some(e.into()),
                }
            }
            if self.bootstrap.is_none() {
                return Err(last.unwrap_or(ClientError::NoBootstrapServers));
            }
        }
        Ok(self.bootstrap.as_mut().expect("connected above"))
    }

    /// Runs `attempt` until it succeeds, fails for good, or retriable errors went on for
    /// `request.timeout.ms`; what is cached about `topic` is dropped between attempts (a moved
    /// leader, a coordinator still loading, a broker restarting).
    pub(crate) fn with_retries<T>(
        &mut self,
        topic: &str,
        target: impl Fn() -> String,
        mut attempt: impl FnMut(&mut Self) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let started = Instant::now();
        let mut backoff = RETRY_BACKOFF;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match attempt(self) {
                Err(e) if e.is_retriable() && started.elapsed() < self.config.request_timeout => {
                    self.invalidate(topic);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
                Err(e) if e.is_retriable() => {
                    return Err(ClientError::RetriesExhausted {
                        target: target(),
                        attempts,
                        elapsed_ms: started.elapsed().as_millis(),
                        last: Box::new(e),
                    })
                }
                other => return other,
            }
        }
    }
}
