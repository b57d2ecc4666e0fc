//! The replica fetcher (Kafka's `ReplicaFetcherManager` and `AbstractFetcherThread`): a
//! follower copies its leaders' logs with the Fetch API.
//!
//! Each leader broker gets `num.replica.fetchers` fetcher threads, each fetching its share of
//! that leader's partitions over one connection to the leader's inter-broker listener (TLS and
//! SASL as a client, with krust-wire's blocking connection). A fetch names this broker as the
//! replica, the leader epoch the follower knows and the epoch of its last fetched batch
//! (KIP-320), so the leader answers a diverging epoch when the follower's log went astray; the
//! follower then truncates to where the two logs agree (KIP-101) and fetches again.
//!
//! These are threads, as in Kafka: the client connection is blocking and a fetcher spends its
//! time waiting on the leader (`replica.fetch.wait.max.ms`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use krust_storage::TopicPartition;
use krust_wire::{BlockingConnection as Connection, ConnectionConfig, SecurityConfig, WireError};
use parking_lot::{Condvar, Mutex};

use crate::clock::now_ms;
use crate::metadata::metadata_cache::MetadataCache;
use crate::partition::{LeaderOffsets, Partition, PartitionError};
use crate::quota::ReplicationQuotas;
use crate::settings::ReplicationSettings;

/// Fetch v12: the first with the follower's last fetched epoch and the leader's diverging
/// epoch (KIP-595), still naming topics (Kafka's leaders take it).
const FETCH_VERSION: i16 = 12;
/// How long a fetch may take before its connection is dropped: the default of Kafka's
/// `replica.socket.timeout.ms`, which krust does not accept yet.
const REPLICA_SOCKET_TIMEOUT_MS: u64 = 30_000;
const LIST_OFFSETS_VERSION: i16 = 4;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// What a fetcher needs besides its partitions.
#[derive(Clone)]
pub struct FetcherConfig {
    pub node_id: i32,
    pub settings: ReplicationSettings,
    /// The listener whose endpoint a leader is reached at (`inter.broker.listener.name`).
    pub listener_name: String,
    /// How the connections are secured (the inter-broker listener's client side).
    pub security: Arc<SecurityConfig>,
    pub metadata: Arc<MetadataCache>,
    /// The follower quota holds back throttled partitions that are not in sync.
    pub replication_quotas: Arc<ReplicationQuotas>,
}

/// One partition a fetcher copies (Kafka's `PartitionFetchState`).
struct FetchState {
    partition: Arc<Partition>,
    leader_epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: Option<i32>,
    /// Backing off after an error until then.
    delayed_until: Option<Instant>,
    /// How far behind the leader's high watermark the last records left it (Kafka's
    /// `PartitionFetchState.lag`): unknown until records came; 0 is in sync.
    lag: Option<i64>,
}

/// What a fetcher thread and the manager share.
struct FetcherShared {
    partitions: Mutex<HashMap<TopicPartition, FetchState>>,
    changed: Condvar,
    stop: AtomicBool,
}

struct Fetcher {
    shared: Arc<FetcherShared>,
    thread: Option<JoinHandle<()>>,
}

/// Kafka's `ReplicaFetcherManager`: the fetcher threads, by leader and fetcher id.
pub struct ReplicaFetcherManager {
    config: FetcherConfig,
    fetchers: Mutex<HashMap<(i32, usize), Fetcher>>,
}

impl ReplicaFetcherManager {
    pub fn new(config: FetcherConfig) -> Self {
        ReplicaFetcherManager {
            config,
            fetchers: Mutex::default(),
        }
    }

    /// Starts copying `partition` from `leader` at `leader_epoch`, from its log end, replacing
    /// whatever fetched it before (Kafka's `addFetcherForPartitions` after makeFollower).
    pub fn add_partition(&self, partition: Arc<Partition>, leader: i32, leader_epoch: i32) {
        self.remove_partition(&partition.topic_partition);
        let (last_fetched_epoch, fetch_offset) = partition.fetch_position();
        let tp = partition.topic_partition.clone();
        let key = (leader, self.fetcher_id(&tp));
        let mut fetchers = self.fetchers.lock();
        let fetcher = fetchers
            .entry(key)
            .or_insert_with(|| self.start_fetcher(leader, key.1));
        fetcher.shared.partitions.lock().insert(
            tp,
            FetchState {
                partition,
                leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                delayed_until: None,
                lag: None,
            },
        );
        fetcher.shared.changed.notify_all();
    }

    /// Stops copying `tp` (it became leader, was deleted, or follows another leader); a
    /// fetcher left with nothing to fetch stops.
    pub fn remove_partition(&self, tp: &TopicPartition) {
        let mut fetchers = self.fetchers.lock();
        let mut idle = Vec::new();
        for (key, fetcher) in fetchers.iter() {
            let mut partitions = fetcher.shared.partitions.lock();
            if partitions.remove(tp).is_some() && partitions.is_empty() {
                idle.push(*key);
            }
        }
        for key in idle {
            if let Some(fetcher) = fetchers.remove(&key) {
                // Not joined: a fetch in flight to a leader that died may take up to
                // replica.socket.timeout.ms, and the metadata must not wait for it.
                fetcher.signal_stop();
            }
        }
    }

    /// The partitions being fetched and the offset each fetches from next.
    pub fn fetch_offsets(&self) -> HashMap<TopicPartition, i64> {
        let fetchers = self.fetchers.lock();
        fetchers
            .values()
            .flat_map(|f| {
                let partitions = f.shared.partitions.lock();
                partitions
                    .iter()
                    .map(|(tp, s)| (tp.clone(), s.fetch_offset))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Stops every fetcher thread and waits for them (broker shutdown: no follower append
    /// may race the final flush).
    pub fn shutdown(&self) {
        let fetchers: Vec<Fetcher> = self.fetchers.lock().drain().map(|(_, f)| f).collect();
        for fetcher in &fetchers {
            fetcher.signal_stop();
        }
        for mut fetcher in fetchers {
            if let Some(thread) = fetcher.thread.take() {
                let _ = thread.join();
            }
        }
    }

    /// Kafka's `getFetcherId`: a partition's share among `num.replica.fetchers`.
    fn fetcher_id(&self, tp: &TopicPartition) -> usize {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        tp.hash(&mut hasher);
        (hasher.finish() % self.config.settings.num_replica_fetchers.max(1) as u64) as usize
    }

    fn start_fetcher(&self, leader: i32, fetcher_id: usize) -> Fetcher {
        let shared = Arc::new(FetcherShared {
            partitions: Mutex::default(),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let thread = FetcherThread {
            leader,
            config: self.config.clone(),
            shared: Arc::clone(&shared),
            connection: None,
        };
        let name = format!("ReplicaFetcherThread-{fetcher_id}-{leader}");
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || thread.run())
            .map_err(|error| tracing::error!(%error, "cannot start a replica fetcher thread"))
            .ok();
        Fetcher { shared, thread }
    }
}

impl Fetcher {
    /// Asks the thread to stop after its fetch in flight, if any.
    fn signal_stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
    }
}

/// One fetch round's request for a partition: what the response is checked against.
struct Requested {
    tp: TopicPartition,
    leader_epoch: i32,
    fetch_offset: i64,
}

struct FetcherThread {
    leader: i32,
    config: FetcherConfig,
    shared: Arc<FetcherShared>,
    connection: Option<Connection>,
}

impl FetcherThread {
    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let (request, requested, throttled) = self.build_fetch();
            if requested.is_empty() {
                if throttled {
                    self.wait_backoff();
                } else {
                    self.idle();
                }
                continue;
            }
            match self.send_fetch(&request) {
                Ok(response) => self.process(&requested, response),
                Err(error) => {
                    tracing::info!(leader = self.leader, %error, "replica fetch failed; backing off");
                    self.connection = None;
                    self.back_off(requested.iter().map(|r| &r.tp));
                }
            }
        }
    }

    fn backoff(&self) -> Duration {
        Duration::from_millis(self.config.settings.replica_fetch_backoff_ms)
    }

    /// Waits until a partition is added or one's backoff ends.
    fn idle(&self) {
        let mut partitions = self.shared.partitions.lock();
        let now = Instant::now();
        // One may have been added since the fetch was built: its notification has passed.
        if partitions
            .values()
            .any(|s| s.delayed_until.is_none_or(|until| until <= now))
        {
            return;
        }
        let wake = partitions
            .values()
            .filter_map(|s| s.delayed_until)
            .min()
            .unwrap_or_else(|| Instant::now() + self.backoff());
        if !self.shared.stop.load(Ordering::Acquire) {
            self.shared.changed.wait_until(&mut partitions, wake);
        }
    }

    /// Kafka's wait when every partition is throttled: `replica.fetch.backoff.ms`, or until
    /// the partitions change.
    fn wait_backoff(&self) {
        let mut partitions = self.shared.partitions.lock();
        if !self.shared.stop.load(Ordering::Acquire) {
            let wake = Instant::now() + self.backoff();
            self.shared.changed.wait_until(&mut partitions, wake);
        }
    }

    fn back_off<'a>(&self, tps: impl Iterator<Item = &'a TopicPartition>) {
        let until = Instant::now() + self.backoff();
        let mut partitions = self.shared.partitions.lock();
        for tp in tps {
            if let Some(state) = partitions.get_mut(tp) {
                state.delayed_until = Some(until);
            }
        }
    }

    /// Kafka's `buildFetch`: every partition not backing off and not held back by the
    /// follower quota (`shouldFollowerThrottle`); true when some partition was held back.
    fn build_fetch(&self) -> (FetchRequest, Vec<Requested>, bool) {
        let settings = &self.config.settings;
        let now = Instant::now();
        let now_ms = now_ms();
        let quota = &self.config.replication_quotas.follower;
        let mut throttled = false;
        let mut partitions = self.shared.partitions.lock();
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut requested = Vec::new();
        for (tp, state) in partitions.iter_mut() {
            if state.delayed_until.is_some_and(|until| until > now) {
                continue;
            }
            state.delayed_until = None;
            let in_sync = state.lag.is_some_and(|lag| lag <= 0);
            if quota.should_throttle(&tp.topic, tp.partition, in_sync, now_ms) {
                throttled = true;
                continue;
            }
            let fetch = FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(state.leader_epoch)
                .with_fetch_offset(state.fetch_offset)
                .with_last_fetched_epoch(state.last_fetched_epoch.unwrap_or(-1))
                .with_log_start_offset(state.partition.log_start_offset())
                .with_partition_max_bytes(settings.replica_fetch_max_bytes);
            match topics.iter_mut().find(|t| t.topic.0.as_str() == tp.topic) {
                Some(topic) => topic.partitions.push(fetch),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![fetch]),
                ),
            }
            requested.push(Requested {
                tp: tp.clone(),
                leader_epoch: state.leader_epoch,
                fetch_offset: state.fetch_offset,
            });
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(self.config.node_id))
            .with_max_wait_ms(settings.replica_fetch_wait_max_ms)
            .with_min_bytes(settings.replica_fetch_min_bytes)
            .with_max_bytes(settings.replica_fetch_response_max_bytes)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        (request, requested, throttled)
    }

    fn connection(&mut self) -> Result<&mut Connection, FetchError> {
        if self.connection.is_none() {
            let address = self.leader_address().ok_or(FetchError::NoEndpoint {
                leader: self.leader,
            })?;
            let config = ConnectionConfig::new(format!("broker-{}-fetcher", self.config.node_id))
                .with_request_timeout(Duration::from_millis(REPLICA_SOCKET_TIMEOUT_MS))
                .with_security(Arc::clone(&self.config.security));
            self.connection = Some(Connection::connect(&address, Arc::new(config))?);
        }
        Ok(self.connection.as_mut().expect("connected above"))
    }

    /// The leader's endpoint on the inter-broker listener, from the metadata.
    fn leader_address(&self) -> Option<String> {
        let image = self.config.metadata.image();
        let broker = image.brokers.get(&self.leader)?;
        let (host, port) = broker.address_for(&self.config.listener_name);
        Some(format!("{host}:{port}"))
    }

    fn send_fetch(&mut self, request: &FetchRequest) -> Result<FetchResponse, FetchError> {
        Ok(self.connection()?.send(request, FETCH_VERSION)?)
    }

    /// Kafka's `processFetchRequest`: applies each partition's answer if the partition is
    /// still fetched as it was asked for.
    fn process(&mut self, requested: &[Requested], response: FetchResponse) {
        if let Some(error) = ResponseError::try_from_code(response.error_code) {
            tracing::info!(leader = self.leader, %error, "the leader refused a replica fetch");
            self.back_off(requested.iter().map(|r| &r.tp));
            return;
        }
        let mut answers = HashMap::new();
        for topic in response.responses {
            let name = topic.topic.0.to_string();
            for data in topic.partitions {
                answers.insert(TopicPartition::new(&name, data.partition_index), data);
            }
        }
        for asked in requested {
            let Some(data) = answers.remove(&asked.tp) else {
                continue;
            };
            let partition = {
                let partitions = self.shared.partitions.lock();
                match partitions.get(&asked.tp) {
                    Some(s)
                        if s.leader_epoch == asked.leader_epoch
                            && s.fetch_offset == asked.fetch_offset =>
                    {
                        Arc::clone(&s.partition)
                    }
                    _ => continue,
                }
            };
            // Ok(Some(high watermark)) when records were appended, Ok(None) otherwise.
            let outcome = match ResponseError::try_from_code(data.error_code) {
                None if data.diverging_epoch.epoch >= 0 => truncate_on_diverging_epoch(
                    &partition,
                    asked.leader_epoch,
                    data.diverging_epoch.epoch,
                    data.diverging_epoch.end_offset,
                )
                .map(|()| None),
                None => self.append(&partition, asked.leader_epoch, &data),
                Some(ResponseError::OffsetOutOfRange) => {
                    self.handle_out_of_range(&partition, asked).map(|()| None)
                }
                Some(error) => Err(FetchError::Leader(error)),
            };
            self.apply_outcome(asked, &partition, outcome);
        }
    }

    fn apply_outcome(
        &self,
        asked: &Requested,
        partition: &Partition,
        outcome: Result<Option<i64>, FetchError>,
    ) {
        let mut partitions = self.shared.partitions.lock();
        let Some(state) = partitions.get_mut(&asked.tp) else {
            return;
        };
        match outcome {
            Ok(high_watermark) => {
                let (last_fetched_epoch, log_end_offset) = partition.fetch_position();
                if let Some(high_watermark) = high_watermark {
                    state.lag = Some((high_watermark - log_end_offset).max(0));
                }
                state.fetch_offset = log_end_offset;
                state.last_fetched_epoch = last_fetched_epoch;
            }
            Err(error) => {
                tracing::info!(partition = %asked.tp, leader = self.leader, %error, "replica fetch of a partition failed; backing off");
                state.delayed_until = Some(Instant::now() + self.backoff());
            }
        }
    }

    /// Kafka's `fetchOffsetAndTruncate` after OFFSET_OUT_OF_RANGE: a leader whose log ends
    /// below this one's (an unclean election) has it truncated to its end; a leader whose log
    /// now starts past this one's end has it emptied to start at the leader's start.
    fn handle_out_of_range(
        &mut self,
        partition: &Partition,
        asked: &Requested,
    ) -> Result<(), FetchError> {
        let leader_end = self.list_offset(&asked.tp, asked.leader_epoch, LATEST)?;
        let (_, log_end_offset) = partition.fetch_position();
        if leader_end < log_end_offset {
            partition.truncate_to(asked.leader_epoch, leader_end)?;
            return Ok(());
        }
        let leader_start = self.list_offset(&asked.tp, asked.leader_epoch, EARLIEST)?;
        if leader_start > log_end_offset {
            partition.truncate_fully_and_start_at(asked.leader_epoch, leader_start)?;
        }
        Ok(())
    }

    /// Appends what the leader sent; the leader's high watermark when records came (they
    /// count against the follower quota if the partition is throttled).
    fn append(
        &self,
        partition: &Partition,
        leader_epoch: i32,
        data: &kafka_protocol::messages::fetch_response::PartitionData,
    ) -> Result<Option<i64>, FetchError> {
        let records = data.records.as_deref().unwrap_or_default();
        let leader = LeaderOffsets {
            high_watermark: data.high_watermark,
            log_start_offset: data.log_start_offset,
        };
        let now = now_ms();
        let tp = &partition.topic_partition;
        let quota = &self.config.replication_quotas.follower;
        if quota.is_throttled(&tp.topic, tp.partition) {
            quota.record(records.len(), now);
        }
        partition.append_as_follower(leader_epoch, records, leader, now)?;
        Ok((!records.is_empty()).then_some(data.high_watermark))
    }

    fn list_offset(
        &mut self,
        tp: &TopicPartition,
        leader_epoch: i32,
        timestamp: i64,
    ) -> Result<i64, FetchError> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.config.node_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_current_leader_epoch(leader_epoch)
                    .with_timestamp(timestamp)])]);
        let response = self.connection()?.send(&request, LIST_OFFSETS_VERSION)?;
        let answer = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == tp.partition)
            .ok_or(FetchError::Leader(ResponseError::UnknownTopicOrPartition))?;
        match ResponseError::try_from_code(answer.error_code) {
            None => Ok(answer.offset),
            Some(error) => Err(FetchError::Leader(error)),
        }
    }
}

/// Why one partition's fetch round failed; the partition backs off and tries again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("the metadata has no endpoint for leader {leader}")]
    NoEndpoint { leader: i32 },
    #[error("the leader answered {0}")]
    Leader(ResponseError),
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error(transparent)]
    Wire(#[from] WireError),
}

/// Kafka's `truncateOnFetchResponse` with `getOffsetTruncationState`: the leader says the
/// follower's last fetched epoch is `epoch` on its side and ends at `end_offset`. If this log
/// has that epoch, both agree up to the smaller end; if it only has an older epoch, it is cut
/// at that epoch's end and the next fetch asks again with the older epoch.
pub(crate) fn truncate_on_diverging_epoch(
    partition: &Partition,
    leader_epoch: i32,
    epoch: i32,
    end_offset: i64,
) -> Result<(), FetchError> {
    let offset = truncation_offset(partition, epoch, end_offset);
    partition.truncate_to(leader_epoch, offset)?;
    Ok(())
}

/// Where to truncate given the leader's (epoch, end offset) for this follower.
fn truncation_offset(partition: &Partition, epoch: i32, end_offset: i64) -> i64 {
    let (_, log_end_offset) = partition.fetch_position();
    match partition.local_end_offset_for_epoch(epoch) {
        Some((local_epoch, local_end)) if local_epoch != epoch => local_end.min(log_end_offset),
        Some((_, local_end)) => end_offset.min(local_end),
        None => end_offset.min(log_end_offset),
    }
}

#[cfg(test)]
mod tests;
