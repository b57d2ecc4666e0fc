//! The broker core as the bindings see it: storage opened at construction, metadata pushed in
//! by the controller, internal logs for the controller and coordinators, and `serve`.

pub mod server;
pub mod transactions;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krust_storage::control_batch::{
    control_record_type, transactional_coordinator_batch, KeyValue,
};
use krust_storage::scheduler::Scheduler;
use krust_storage::{CleanerConfig, LogManager, StorageError, TopicPartition};
use tokio::sync::watch;

use crate::authorizer::{Authorizer, AuthorizerReceiver, DecisionCache};
use crate::bridge::Bridge;
use crate::broker::server::{serve, ServeError};
use crate::clock::now_ms;
use crate::controller_channel::broker_channels::BrokerChannels;
use crate::controller_channel::controller_quorum::{ControllerQuorum, QuorumCell, StartError};
use crate::controller_channel::controller_route::{ControllerAlterPartition, ControllerChannels};
use crate::controller_channel::node_channel::{host_port, ControllerLocator};
use crate::handlers::throttling::charge_handling_time;
use crate::metadata::metadata_cache::{MetadataCache, MetadataDelta, MetadataImage};
use crate::metrics::BrokerMetrics;
use crate::quota::connection_limits::{ConnectionCounter, ConnectionLimits};
use crate::quota::{ClientQuotaManager, ClientQuotaTable};
use crate::replica::alter_partition::{AlterPartitionManager, AlterPartitionSender};
use crate::replica::replica_fetcher::{FetcherConfig, ReplicaFetcherManager};
use crate::replica::replica_manager::{
    ApplyError, InternalLogError, NotReplicated, ReplicaManager,
};
use crate::security::scram::{ScramCredential, ScramCredentials, ScramMechanism};
use crate::server_context::ServerContext;
use crate::settings::BrokerSettings;
use crate::transaction::producer_ids::ProducerIdManager;
use krust_raft::state_machine::Applier;

/// A record as stored in an internal log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// The batch's producer id: -1, or the transactional producer whose transaction the record
    /// belongs to (a TxnOffsetCommit's offsets).
    pub producer_id: i64,
    /// For a transaction marker (a control record), its type: 0 ABORT, 1 COMMIT.
    pub control: Option<i16>,
}

/// The producer of a transactional batch a coordinator writes (TxnOffsetCommit's offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionalProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Why the broker could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the logs in {dirs}: {source}")]
    Logs { dirs: String, source: StorageError },
    #[error("cannot start the log dir failure handler: {0}")]
    FailureHandler(#[source] std::io::Error),
    #[error("cannot start the metadata applier thread: {0}")]
    MetadataApplier(#[source] std::io::Error),
    #[error("cannot start the thread moving replicas between log dirs: {0}")]
    LogDirMover(#[source] std::io::Error),
    #[error("cannot start the controller channels: {0}")]
    ControllerChannels(#[source] std::io::Error),
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum BrokerServeError {
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("every log dir has failed ({dirs}); see the log for the cause")]
    AllLogDirsOffline { dirs: String },
}

/// How long a coordinator's write waits for its replicas: Kafka's
/// `offsets.commit.timeout.ms` default (krust refuses other values of the key).
pub(crate) const INTERNAL_REPLICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed internal read or write.
#[derive(Debug, thiserror::Error)]
pub enum InternalRecordsError {
    #[error(transparent)]
    Log(#[from] InternalLogError),
    #[error("cannot encode or decode records: {0}")]
    Codec(String),
    #[error("the records are written but not replicated: {0}")]
    NotReplicated(#[from] NotReplicated),
}

pub struct Broker {
    settings: BrokerSettings,
    metadata: Arc<MetadataCache>,
    pub(crate) replicas: Arc<ReplicaManager>,
    metrics: Arc<BrokerMetrics>,
    quotas: Arc<ClientQuotaManager>,
    connections: Arc<ConnectionCounter>,
    stop: Arc<watch::Sender<bool>>,
    /// True once `serve` has bound every listener (and the metrics endpoint).
    listening: watch::Sender<bool>,
    /// Authorization decisions of the configured authorizer, forgotten when ACLs change.
    authorizations: Arc<DecisionCache>,
    /// Applies metadata deltas to the hosted partitions, one after another, off the
    /// controller's path (Kafka's metadata publisher): a topic's logs are created after the
    /// controller has answered.
    applier: Scheduler,
    /// The SCRAM credentials of the metadata image (SASL/SCRAM listeners read them).
    scram_credentials: Arc<ScramCredentials>,
    /// The log cleaner's settings in force: the static ones under the dynamic broker configs.
    cleaner: parking_lot::Mutex<CleanerConfig>,
    /// Which node is the active controller, and the channels to it (none for a quorum of one).
    controller_locator: Arc<ControllerLocator>,
    controller_channels: Option<ControllerChannels>,
    /// This broker's registration epoch (-1 until registered), for AlterPartition.
    broker_epoch: Arc<AtomicI64>,
    /// This node's member of the controller quorum, once `start_quorum` ran.
    quorum: QuorumCell,
    /// Producer ids handed out by this broker, from blocks the controller allocates.
    pub(crate) producer_ids: Arc<ProducerIdManager>,
    /// Channels to the other brokers (transaction markers, KIP-890 verification).
    pub(crate) broker_channels: Arc<BrokerChannels>,
    /// The bridge and runtime of `serve` while it runs (calls from Python need them); dropped
    /// when it stops, so that the bridge's thread sees its last sender go.
    pub(crate) serving: parking_lot::Mutex<Option<Serving>>,
}

/// What `serve` runs on, for calls that come from outside it.
pub(crate) struct Serving {
    pub bridge: Bridge,
    pub runtime: tokio::runtime::Handle,
}

impl Broker {
    /// Opens (and if needed recovers) every log under log.dirs.
    pub fn open(settings: BrokerSettings) -> Result<Broker, OpenError> {
        raise_open_file_limit();
        let log_manager = LogManager::open(&settings.log_dirs, settings.log_defaults.clone())
            .map_err(|source| OpenError::Logs {
                dirs: joined_log_dirs(&settings),
                source,
            })?;
        let replicas = Arc::new(
            ReplicaManager::new(
                settings.node_id,
                log_manager,
                settings.log_defaults.clone(),
                settings.metadata_log.clone(),
            )
            .with_replication_settings(settings.replication.clone()),
        );
        let stop = Arc::new(watch::Sender::new(false));
        let halt = Arc::clone(&stop);
        replicas
            .start_log_dir_failure_handler(move || {
                halt.send_replace(true);
            })
            .map_err(OpenError::FailureHandler)?;
        replicas
            .start_log_dir_mover()
            .map_err(OpenError::LogDirMover)?;
        let applier =
            Scheduler::start("krust-metadata-applier").map_err(OpenError::MetadataApplier)?;
        let controller_locator = Arc::new(ControllerLocator::new(
            settings
                .quorum
                .voters
                .iter()
                .map(|(id, host, port)| (*id, host_port(host, *port))),
        ));
        let controller_channels = ControllerChannels::start(&settings, &controller_locator)
            .map_err(OpenError::ControllerChannels)?;
        let metadata = Arc::<MetadataCache>::default();
        let cleaner = parking_lot::Mutex::new(settings.cleaner.clone());
        Ok(Broker {
            producer_ids: Arc::new(ProducerIdManager::new(settings.node_id)),
            broker_channels: Arc::new(BrokerChannels::new(
                settings.node_id,
                settings.inter_broker_listener_name(),
                Arc::clone(&metadata),
            )),
            serving: parking_lot::Mutex::default(),
            listening: watch::Sender::new(false),
            broker_epoch: Arc::new(AtomicI64::new(-1)),
            controller_locator,
            controller_channels,
            quotas: Arc::new(ClientQuotaManager::new(settings.quota_window)),
            connections: Arc::new(ConnectionCounter::new(
                ConnectionLimits {
                    max_connections: settings.max_connections,
                    max_per_ip: settings.max_connections_per_ip,
                    ..ConnectionLimits::default()
                },
                settings.quota_window,
            )),
            settings,
            metadata,
            replicas,
            metrics: Arc::default(),
            stop,
            authorizations: Arc::default(),
            applier,
            scram_credentials: Arc::default(),
            cleaner,
            quorum: Arc::default(),
        })
    }

    pub fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    /// Starts replication (issue 12): the partitions this broker follows are fetched from
    /// their leaders' `inter.broker.listener.name` endpoints, connecting with `security`;
    /// the ISR changes of those it leads are sent with `alter_partition` (the controller
    /// channel), on `runtime`. Until then followers fetch nothing and ISR changes stay
    /// pending. `serve` starts it with the controller channel; only the first call counts,
    /// so a caller with its own `alter_partition` (a test's controller) calls this first.
    pub fn start_replication(
        &self,
        alter_partition: Arc<dyn AlterPartitionSender>,
        security: Arc<krust_wire::SecurityConfig>,
        runtime: tokio::runtime::Handle,
    ) {
        let node_id = self.settings.node_id;
        let fetchers = ReplicaFetcherManager::new(FetcherConfig {
            node_id,
            settings: self.settings.replication.clone(),
            listener_name: self.settings.inter_broker_listener_name(),
            security,
            metadata: Arc::clone(&self.metadata),
            replication_quotas: Arc::clone(self.replicas.replication_quotas()),
        });
        let alter_partitions = AlterPartitionManager::new(node_id, alter_partition, runtime);
        self.replicas.start_replication(fetchers, alter_partitions);
    }

    /// Replaces the SCRAM credentials SASL/SCRAM authenticates against (the metadata image's
    /// UserScramCredentialRecords); connections authenticate against the new set at once.
    pub fn set_scram_credentials(
        &self,
        credentials: HashMap<(String, ScramMechanism), ScramCredential>,
    ) {
        self.scram_credentials.replace_all(credentials);
    }

    /// The broker's metrics; the log cleaner reports its backlog through
    /// `BrokerMetrics::set_cleaner_backlog`.
    pub fn metrics(&self) -> &Arc<BrokerMetrics> {
        &self.metrics
    }

    /// The client quotas the broker enforces (set from the metadata image, or by a callback).
    pub fn quotas(&self) -> &Arc<ClientQuotaManager> {
        &self.quotas
    }

    /// Installs the metadata image's client quotas: user and client-id quotas, and the ip
    /// entities' connection_creation_rate.
    pub fn set_client_quotas(&self, table: ClientQuotaTable) {
        self.connections
            .set_ip_connection_rates(table.ip_connection_rates.clone());
        self.quotas.set_table(table);
    }

    /// Charges `handling` (a request served in Python) against the client's
    /// request_percentage; the throttle time in ms (0: within its quota or no quota).
    pub fn charge_request_time(&self, user: &str, client_id: &str, handling: Duration) -> i64 {
        if !self.quotas.enabled() {
            return 0;
        }
        charge_handling_time(&self.quotas, user, client_id, handling, now_ms())
    }

    /// The connection limits (max.connections, max.connections.per.ip and its overrides,
    /// max.connection.creation.rate), changed while the broker runs.
    pub fn set_connection_limits(&self, limits: ConnectionLimits) {
        self.connections.set_limits(limits);
    }

    /// What moving replicas between this broker's log dirs may copy per second
    /// (`replica.alter.log.dirs.io.max.bytes.per.second`), changed while the broker runs.
    pub fn set_alter_log_dirs_throttled_rate(&self, bytes_per_second: i64) {
        self.replicas
            .set_alter_log_dirs_throttled_rate(bytes_per_second);
    }

    /// `leader.replication.throttled.rate` and `follower.replication.throttled.rate` in force
    /// (bytes per second), changed while the broker runs.
    pub fn set_replication_throttled_rates(&self, leader: i64, follower: i64) {
        let quotas = self.replicas.replication_quotas();
        quotas.leader.set_bound(leader);
        quotas.follower.set_bound(follower);
    }

    /// The dynamic `log.cleaner.*` keys in force (threads, dedupe buffer, backoff, I/O rate),
    /// changed while the broker runs: a running cleaner restarts its threads with them, as
    /// Kafka's LogCleaner.reconfigure does. `log.cleaner.enable` stays as configured.
    pub fn reconfigure_cleaner(&self, mut config: CleanerConfig) -> Result<(), StorageError> {
        let mut cleaner = self.cleaner.lock();
        config.enable = cleaner.enable;
        if config == *cleaner {
            return Ok(());
        }
        self.replicas.log_manager().reconfigure_cleaner(&config)?;
        *cleaner = config;
        Ok(())
    }

    /// Sets the broker defaults of the topic configs (topic key names, from the static and
    /// dynamic broker configs) used by the next `apply_metadata`.
    pub fn set_log_defaults(&self, defaults: &HashMap<String, String>) {
        self.replicas.set_log_defaults(defaults);
    }

    /// Installs the full metadata image (at start-up) and reconciles the hosted partitions.
    /// The image is installed even if some partitions failed (see `ApplyError`).
    pub fn apply_metadata(&self, image: MetadataImage) -> Result<(), ApplyError> {
        let applied = self.replicas.apply_image(&image);
        self.metadata.replace(image);
        // As Kafka's broker starts its LogManager once metadata has caught up: only now do
        // the loaded logs carry their topics' cleanup.policy.
        let cleaner = self.cleaner.lock().clone();
        if let Err(error) = self.replicas.log_manager().start_cleaner(&cleaner) {
            tracing::error!("the log cleaner did not start: {error}");
        } else if self.replicas.log_manager().cleaner_status().is_some() {
            let replicas = Arc::downgrade(&self.replicas);
            self.metrics.set_cleaner_backlog(Box::new(move || {
                replicas
                    .upgrade()
                    .and_then(|r| r.log_manager().cleaner_status())
                    .map_or(0, |status| status.dirty_bytes)
            }));
        }
        applied
    }

    /// Applies one committed change: to the cache at once, then to the hosted partitions in
    /// the order of the changes. A change that only adds topics returns without waiting for
    /// their logs, as Kafka's controller answers CreateTopics once the records are committed
    /// and its brokers create the logs afterwards; until then a request for such a partition
    /// gets UNKNOWN_TOPIC_OR_PARTITION, which clients retry. Any other change (deletions,
    /// config changes, new partitions of a topic) waits until it is applied, so its effects
    /// are in place when the controller answers; the error is returned then, and logged for
    /// new topics.
    pub fn apply_metadata_delta(&self, delta: &MetadataDelta) -> Result<(), ApplyError> {
        let before = self.metadata.image();
        self.metadata.apply_delta(delta);
        let only_new_topics = delta.deleted_topic_ids.is_empty()
            && delta.log_defaults.is_none()
            && delta.topics.iter().all(|t| before.topic(&t.name).is_none());
        let (done, applied) = std::sync::mpsc::channel();
        let replicas = Arc::clone(&self.replicas);
        let delta = delta.clone();
        let scheduled = self.applier.schedule(move || {
            let result = replicas.apply_delta(&before, &delta);
            if let Err(error) = &result {
                tracing::error!(%error, "cannot apply a metadata change to the hosted partitions");
            }
            let _ = done.send(result);
        });
        if !scheduled || only_new_topics {
            return Ok(());
        }
        applied.recv().unwrap_or(Ok(()))
    }

    /// Waits until every metadata change handed to `apply_metadata_delta` so far is applied
    /// to the hosted partitions.
    pub fn wait_for_metadata_applied(&self) {
        self.applier.drain();
    }

    /// Appends `(key, value)` records as one uncompressed batch, flushed; returns its base offset
    /// once the in-sync replicas have it too (a coordinator's acks=-1).
    /// With `producer`, the batch is part of that producer's transaction (KIP-98: offsets a
    /// TxnOffsetCommit writes stay pending until the transaction's marker).
    pub fn internal_append(
        &self,
        topic: &str,
        partition: i32,
        records: &[(Option<Bytes>, Option<Bytes>)],
        producer: Option<TransactionalProducer>,
    ) -> Result<i64, InternalRecordsError> {
        let now = now_ms();
        let batch = match producer {
            None => encode_batch(records, now)
                .map_err(|e| InternalRecordsError::Codec(e.to_string()))?
                .to_vec(),
            Some(producer) => {
                let records: Vec<KeyValue<'_>> = records
                    .iter()
                    .map(|(key, value)| (key.as_deref(), value.as_deref()))
                    .collect();
                transactional_coordinator_batch(
                    producer.producer_id,
                    producer.producer_epoch,
                    &records,
                    now,
                )
            }
        };
        let tp = TopicPartition::new(topic, partition);
        let info = self.replicas.append_internal(&tp, &batch, now)?;
        self.replicas.await_internal_replication(
            &tp,
            info.last_offset + 1,
            INTERNAL_REPLICATION_TIMEOUT,
        )?;
        Ok(info.first_offset)
    }

    /// Reads records at or after `start_offset` (about `max_bytes` worth of batches).
    pub fn internal_read(
        &self,
        topic: &str,
        partition: i32,
        start_offset: i64,
        max_bytes: usize,
    ) -> Result<Vec<StoredRecord>, InternalRecordsError> {
        let tp = TopicPartition::new(topic, partition);
        let mut bytes = self.replicas.read_internal(&tp, start_offset, max_bytes)?;
        let sets = RecordBatchDecoder::decode_all(&mut bytes)
            .map_err(|e| InternalRecordsError::Codec(e.to_string()))?;
        Ok(sets
            .into_iter()
            .flat_map(|set| set.records)
            .filter(|r| r.offset >= start_offset)
            .map(|r| StoredRecord {
                offset: r.offset,
                timestamp: r.timestamp,
                // A control record too short to name a type (-1) is no marker: Python skips it.
                control: r
                    .control
                    .then(|| r.key.as_deref().and_then(control_record_type).unwrap_or(-1)),
                producer_id: r.producer_id,
                key: r.key,
                value: r.value,
            })
            .collect())
    }

    pub fn log_end_offset(&self, topic: &str, partition: i32) -> Result<i64, InternalLogError> {
        self.replicas
            .internal_log_end_offset(&TopicPartition::new(topic, partition))
    }

    pub fn log_start_offset(&self, topic: &str, partition: i32) -> Result<i64, InternalLogError> {
        self.replicas
            .internal_log_start_offset(&TopicPartition::new(topic, partition))
    }

    /// Joins the controller quorum (docs/quorum.md): the newest metadata snapshot is loaded into
    /// `applier`, which then gets every committed record in order.
    pub async fn start_quorum(&self, applier: Arc<dyn Applier>) -> Result<(), StartError> {
        if self.quorum.get().is_some() {
            return Err(StartError::AlreadyStarted);
        }
        let quorum = ControllerQuorum::start(&self.settings, &self.replicas, applier).await?;
        self.quorum
            .set(quorum)
            .map_err(|_| StartError::AlreadyStarted)
    }

    /// The metadata log `__cluster_metadata-0`.
    pub fn metadata_log(&self) -> Result<krust_storage::log_manager::SharedLog, InternalLogError> {
        self.replicas.metadata_log()
    }

    /// This node's quorum member, once started.
    pub fn quorum(&self) -> Option<&ControllerQuorum> {
        self.quorum.get()
    }

    /// What connections share while serving, with Python-owned requests going to `bridge`.
    pub fn server_context(&self, bridge: Bridge) -> Arc<ServerContext> {
        self.authorized_server_context(bridge, None)
    }

    /// Like `server_context`, with requests authorized by `authorizer`.
    pub fn authorized_server_context(
        &self,
        bridge: Bridge,
        authorizer: Option<Authorizer>,
    ) -> Arc<ServerContext> {
        Arc::new(ServerContext {
            scram_credentials: self.scram_credentials.clone(),
            quorum: self.quorum.clone(),
            producer_ids: self.producer_ids.clone(),
            broker_channels: self.broker_channels.clone(),
            ..ServerContext::new(
                self.settings.clone(),
                self.metadata.clone(),
                self.replicas.clone(),
                bridge,
                self.metrics.clone(),
                self.quotas.clone(),
                self.connections.clone(),
            )
            .with_authorizer(authorizer)
            .with_controller(
                self.controller_locator.clone(),
                self.controller_channels.clone(),
            )
        })
    }

    /// This broker's epoch, from its registration with the active controller.
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Relaxed);
    }

    /// The quorum's leader is `leader` (-1: none known): requests to the controller go there.
    pub fn set_active_controller(&self, leader: i32) {
        self.controller_locator.set_leader(leader);
    }

    /// The channels to the active controller; `None` when this node is a quorum of one.
    pub fn controller_channels(&self) -> Option<&ControllerChannels> {
        self.controller_channels.as_ref()
    }

    /// An authorizer over this broker's decision cache; its misses arrive at the receiver.
    pub fn authorizer(&self) -> (Authorizer, AuthorizerReceiver) {
        Authorizer::new(self.authorizations.clone())
    }

    /// Forgets every cached authorization decision (ACLs changed, or the plugin asked).
    pub fn invalidate_authorizations(&self) {
        self.authorizations.invalidate();
    }

    /// Serves clients until `shutdown()` or the failure of every log dir.
    pub async fn serve(
        &self,
        bridge: Bridge,
        authorizer: Option<Authorizer>,
    ) -> Result<(), BrokerServeError> {
        if !self.replicas.all_log_dirs_offline() {
            let alter_partition = ControllerAlterPartition::new(
                self.controller_channels.as_ref(),
                Arc::clone(&self.broker_epoch),
            );
            self.start_replication(
                Arc::new(alter_partition),
                Arc::default(),
                tokio::runtime::Handle::current(),
            );
            *self.serving.lock() = Some(Serving {
                bridge: bridge.clone(),
                runtime: tokio::runtime::Handle::current(),
            });
            let context = self.authorized_server_context(bridge, authorizer);
            let served = serve(context, self.stop.subscribe(), &self.listening).await;
            self.serving.lock().take();
            served?;
        }
        if self.replicas.all_log_dirs_offline() {
            return Err(BrokerServeError::AllLogDirsOffline {
                dirs: joined_log_dirs(&self.settings),
            });
        }
        Ok(())
    }

    /// Turns true once `serve` listens on every port: a start-up message that says so is
    /// true only then.
    pub fn listening(&self) -> watch::Receiver<bool> {
        self.listening.subscribe()
    }

    /// Asks `serve` to stop.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Flushes all logs and writes checkpoints and the clean-shutdown marker.
    pub fn close(&self) -> Result<(), StorageError> {
        // Logs still being created are created (and then closed cleanly).
        self.applier.shutdown();
        self.replicas.shutdown()
    }
}

fn joined_log_dirs(settings: &BrokerSettings) -> String {
    settings
        .log_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Each partition keeps its active segment's `.log` file open: lift the soft open-file limit
/// to the hard one, as the JVM does for Kafka (`-XX:+MaxFDLimit`, on by default).
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(%error, "cannot raise the open file limit");
        }
    }
}

/// Encodes `(key, value)` records as one uncompressed v2 batch without a producer id, the way
/// a client would send it (base offset 0).
pub fn encode_batch(
    records: &[(Option<Bytes>, Option<Bytes>)],
    timestamp: i64,
) -> anyhow::Result<BytesMut> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch unless offset - sequence stays constant; this
            // keeps one batch whose base sequence is -1 (no producer id).
            sequence: i as i32 - 1,
            timestamp,
            key: key.clone(),
            value: value.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(batch)
}
