//! Partitions hosted by this broker, kept in step with the metadata: the full image once at
//! start-up, then one delta per committed change, touching only the partitions it names.
//!
//! A storage failure while applying (out of descriptors, out of disk) takes the log dir
//! offline as in Kafka: its partitions answer KAFKA_STORAGE_ERROR, the rest of the change is
//! still applied, and when no log dir is left the broker stops.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use krust_storage::{
    AppendError, AppendOrigin, LogAppendInfo, LogConfig, LogManager, LogSpec, ReadError, SharedLog,
    StorageError, TopicPartition,
};
use parking_lot::RwLock;
use uuid::Uuid;

use crate::metadata::metadata_cache::{
    MetadataDelta, MetadataImage, PartitionMetadata, TopicMetadata,
};
use crate::metadata::metadata_log::{MetadataLogSettings, METADATA_LOG_TOPIC};
use crate::partition::{log_dir_of, Partition, PartitionError};
use crate::quota::ReplicationQuotas;
use crate::replica::alter_partition::AlterPartitionManager;
use crate::replica::replica_fetcher::ReplicaFetcherManager;
use crate::settings::{topic_log_config, ReplicationSettings};
use metadata_log::MetadataSnapshots;

/// Why a partition operation failed, as a Kafka error code.
pub type ErrorCode = i16;

/// Hosted partitions by topic name, then partition index.
type HostedTopics = HashMap<String, HashMap<i32, Arc<Partition>>>;

/// All partitions hosted here.
pub struct ReplicaManager {
    node_id: i32,
    log_manager: LogManager,
    /// The static broker defaults (the config file's), under `log_defaults`.
    static_log_defaults: LogConfig,
    /// The broker defaults in force: static ones with the dynamic broker configs applied.
    pub(crate) log_defaults: RwLock<LogConfig>,
    partitions: RwLock<HostedTopics>,
    /// Partitions whose log dir failed (Kafka's HostedPartition.Offline).
    offline: RwLock<HashSet<TopicPartition>>,
    pub(crate) metadata_log_settings: MetadataLogSettings,
    pub(crate) metadata_snapshots: MetadataSnapshots,
    replication: ReplicationSettings,
    /// Set once replication starts (`start_replication`): the fetchers of the partitions
    /// this broker follows and the channel for ISR changes of those it leads.
    fetchers: OnceLock<ReplicaFetcherManager>,
    alter_partitions: OnceLock<AlterPartitionManager>,
    /// The replication throttles; the topics' throttled replicas follow the metadata.
    replication_quotas: Arc<ReplicationQuotas>,
    /// One AlterReplicaLogDirs at a time (Kafka's `replicaStateChangeLock`).
    altering_log_dirs: parking_lot::Mutex<()>,
    /// The thread copying future logs (`start_log_dir_mover`) and the bytes per second it
    /// may copy (`replica.alter.log.dirs.io.max.bytes.per.second`).
    log_dir_mover: OnceLock<log_dirs::LogDirMover>,
    alter_log_dirs_rate: std::sync::atomic::AtomicI64,
}

/// Partitions a metadata change could not be applied to for a reason other than a failed log
/// dir (which takes the dir offline instead).
#[derive(Debug, thiserror::Error)]
#[error("cannot apply the metadata to {count} partition(s); {partition}: {source}")]
pub struct ApplyError {
    pub partition: TopicPartition,
    pub count: usize,
    #[source]
    pub source: StorageError,
}

/// What one apply collects while it carries on past failed partitions.
#[derive(Default)]
struct ApplyOutcome {
    failed: Vec<(TopicPartition, StorageError)>,
}

impl ApplyOutcome {
    fn into_result(self) -> Result<(), ApplyError> {
        let count = self.failed.len();
        match self.failed.into_iter().next() {
            None => Ok(()),
            Some((partition, source)) => Err(ApplyError {
                partition,
                count,
                source,
            }),
        }
    }
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        log_manager: LogManager,
        log_defaults: LogConfig,
        metadata_log_settings: MetadataLogSettings,
    ) -> Self {
        ReplicaManager {
            metadata_log_settings,
            metadata_snapshots: MetadataSnapshots::default(),
            node_id,
            log_manager,
            static_log_defaults: log_defaults.clone(),
            log_defaults: RwLock::new(log_defaults),
            partitions: RwLock::default(),
            offline: RwLock::default(),
            replication: ReplicationSettings::default(),
            fetchers: OnceLock::new(),
            alter_partitions: OnceLock::new(),
            replication_quotas: Arc::default(),
            altering_log_dirs: parking_lot::Mutex::default(),
            log_dir_mover: OnceLock::new(),
            alter_log_dirs_rate: std::sync::atomic::AtomicI64::new(i64::MAX),
        }
    }

    /// The leader and follower replication quotas (KIP-73).
    pub fn replication_quotas(&self) -> &Arc<ReplicationQuotas> {
        &self.replication_quotas
    }

    pub fn log_manager(&self) -> &LogManager {
        &self.log_manager
    }

    /// Every partition hosted here, whatever its role.
    pub fn hosted_partitions(&self) -> Vec<Arc<Partition>> {
        let hosted = self.partitions.read();
        hosted.values().flat_map(|p| p.values().cloned()).collect()
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.partitions.read().get(topic)?.get(&partition).cloned()
    }

    /// The partition if this broker may serve clients for it (Kafka's getPartitionOrError and
    /// leader check): else UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER or, in a failed
    /// log dir, KAFKA_STORAGE_ERROR.
    pub fn leader_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, ErrorCode> {
        let hosted = self.hosted_partition(topic, partition)?;
        hosted
            .check_leader_for_clients()
            .map_err(|e| e.kafka_error_code())?;
        Ok(hosted)
    }

    /// The partition if this broker hosts a replica of it, leader or not (Kafka's
    /// getPartitionOrError): else UNKNOWN_TOPIC_OR_PARTITION or, in a failed log dir,
    /// KAFKA_STORAGE_ERROR.
    pub fn hosted_partition(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Partition>, ErrorCode> {
        let Some(hosted) = self.partition(topic, partition) else {
            let offline = self
                .offline
                .read()
                .contains(&TopicPartition::new(topic, partition));
            let error = if offline {
                ResponseError::KafkaStorageError
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            return Err(error.code());
        };
        Ok(hosted)
    }

    /// Sets the broker defaults of the topic configs (by topic key name) from the static and
    /// dynamic broker configs; true when they changed. Callers then re-apply every topic.
    pub fn set_log_defaults(&self, defaults: &HashMap<String, String>) -> bool {
        let config = topic_log_config(&self.static_log_defaults, defaults);
        let mut current = self.log_defaults.write();
        let changed = *current != config;
        *current = config;
        changed
    }

    /// Start-up: creates or updates every partition the image places here and drops hosted
    /// partitions it no longer has.
    pub fn apply_image(&self, image: &MetadataImage) -> Result<(), ApplyError> {
        let mut outcome = ApplyOutcome::default();
        let stale: Vec<(String, i32)> = {
            let hosted = self.partitions.read();
            hosted
                .iter()
                .flat_map(|(topic, partitions)| {
                    let placed = image.topic(topic);
                    partitions.keys().filter_map(move |index| {
                        let kept = placed.is_some_and(|t| t.partition(*index).is_some());
                        (!kept).then(|| (topic.clone(), *index))
                    })
                })
                .collect()
        };
        for (topic, index) in stale {
            self.stop_partition(&TopicPartition::new(&topic, index), &mut outcome);
        }
        let names: HashSet<&str> = image.topics.keys().map(String::as_str).collect();
        self.replication_quotas.retain_topics(&names);
        for topic in image.topics.values() {
            self.replication_quotas
                .update_topic(self.node_id, &topic.name, &topic.configs);
            self.apply_topic(topic, &topic.partitions, true, &mut outcome);
        }
        outcome.into_result()
    }

    /// Applies one committed change: `before` is the image the delta applies to.
    pub fn apply_delta(
        &self,
        before: &MetadataImage,
        delta: &MetadataDelta,
    ) -> Result<(), ApplyError> {
        let mut outcome = ApplyOutcome::default();
        for id in &delta.deleted_topic_ids {
            if let Some(topic) = before.topic_by_id(id) {
                self.replication_quotas.remove_topic(&topic.name);
                self.delete_topic(&topic.name, &mut outcome);
            }
        }
        let defaults_changed = delta
            .log_defaults
            .as_ref()
            .is_some_and(|defaults| self.set_log_defaults(defaults));
        for topic in &delta.topics {
            self.replication_quotas
                .update_topic(self.node_id, &topic.name, &topic.configs);
            let configs_changed = defaults_changed
                || before
                    .topic(&topic.name)
                    .is_none_or(|t| t.configs != topic.configs);
            self.apply_topic(topic, &topic.partitions, configs_changed, &mut outcome);
        }
        if defaults_changed {
            let named: HashSet<&str> = delta.topics.iter().map(|t| t.name.as_str()).collect();
            let deleted: HashSet<&Uuid> = delta.deleted_topic_ids.iter().collect();
            for topic in before.topics.values() {
                if !named.contains(topic.name.as_str()) && !deleted.contains(&topic.topic_id) {
                    self.apply_topic(topic, &[], true, &mut outcome);
                }
            }
        }
        outcome.into_result()
    }

    /// Applies `placements` of `topic`; with `configs_changed` every hosted partition of the
    /// topic takes its configs.
    fn apply_topic(
        &self,
        topic: &TopicMetadata,
        placements: &[PartitionMetadata],
        configs_changed: bool,
        outcome: &mut ApplyOutcome,
    ) {
        let config = topic_log_config(&self.log_defaults.read(), &topic.configs);
        if configs_changed {
            let hosted: Vec<TopicPartition> = self
                .partitions
                .read()
                .get(&topic.name)
                .map(|p| p.values().map(|p| p.topic_partition.clone()).collect())
                .unwrap_or_default();
            for tp in hosted {
                if let Err(error) = self.log_manager.update_config(&tp, config.clone()) {
                    self.record_failure(tp, error, outcome);
                }
            }
        }
        let mut missing = Vec::new();
        for placement in placements {
            let tp = TopicPartition::new(&topic.name, placement.partition);
            if !placement.replicas.contains(&self.node_id) {
                self.stop_partition(&tp, outcome);
                continue;
            }
            // An offline partition stays offline until restart, never re-created elsewhere.
            if self.offline.read().contains(&tp) {
                continue;
            }
            match self.partition(&tp.topic, tp.partition) {
                Some(partition) => self.transition(partition, placement),
                None => missing.push((tp, placement)),
            }
        }
        let specs = missing
            .iter()
            .map(|(tp, _)| LogSpec {
                topic_partition: tp.clone(),
                topic_id: Some(*topic.topic_id.as_bytes()),
                config: config.clone(),
            })
            .collect();
        let logs = self.log_manager.get_or_create_all(specs);
        for ((tp, placement), log) in missing.into_iter().zip(logs) {
            match log {
                Ok(log) => {
                    let partition = self.add_partition(tp, topic.topic_id, log);
                    self.transition(partition, placement);
                }
                Err(error) => self.record_failure(tp, error, outcome),
            }
        }
    }

    fn add_partition(&self, tp: TopicPartition, topic_id: Uuid, log: SharedLog) -> Arc<Partition> {
        let partition = Arc::new(Partition::new(
            tp.clone(),
            topic_id,
            self.node_id,
            self.replication.replica_lag_time_max_ms,
            log,
            self.log_manager.failure_channel().clone(),
        ));
        self.partitions
            .write()
            .entry(tp.topic)
            .or_default()
            .insert(tp.partition, Arc::clone(&partition));
        partition
    }

    fn delete_topic(&self, topic: &str, outcome: &mut ApplyOutcome) {
        let removed = self.partitions.write().remove(topic).unwrap_or_default();
        for partition in removed.into_values() {
            self.stop_fetching(&partition.topic_partition);
            partition.mark_deleted();
            self.delete_log(&partition.topic_partition, outcome);
        }
        self.offline.write().retain(|tp| tp.topic != topic);
    }

    /// Kafka's StopReplica with deletion: this broker no longer hosts the partition.
    fn stop_partition(&self, tp: &TopicPartition, outcome: &mut ApplyOutcome) {
        let removed = {
            let mut hosted = self.partitions.write();
            let removed = hosted
                .get_mut(&tp.topic)
                .and_then(|p| p.remove(&tp.partition));
            if hosted.get(&tp.topic).is_some_and(HashMap::is_empty) {
                hosted.remove(&tp.topic);
            }
            removed
        };
        if let Some(partition) = removed {
            self.stop_fetching(tp);
            partition.mark_deleted();
            self.delete_log(tp, outcome);
        }
        self.offline.write().remove(tp);
    }

    fn delete_log(&self, tp: &TopicPartition, outcome: &mut ApplyOutcome) {
        let dir = self.log_manager.get(tp).map(|log| log_dir_of(&log));
        if let Err(error) = self.log_manager.delete(tp) {
            if let (Some(dir), StorageError::Io { .. }) = (&dir, &error) {
                self.log_manager
                    .failure_channel()
                    .maybe_add_offline_log_dir(dir, &error);
            }
            self.record_failure(tp.clone(), error, outcome);
        }
    }

    /// A failed log dir makes the partition offline (the dir's failure is logged once, by the
    /// failure channel); any other failure is reported to the caller.
    fn record_failure(&self, tp: TopicPartition, error: StorageError, outcome: &mut ApplyOutcome) {
        match error {
            StorageError::Io { .. } | StorageError::AllLogDirsOffline | StorageError::LogClosed => {
                self.offline.write().insert(tp);
            }
            error => {
                tracing::error!(partition = %tp, %error, "cannot apply the metadata change");
                outcome.failed.push((tp, error));
            }
        }
    }

    /// Kafka's handleLogDirFailure: the dir's partitions go offline and its logs are closed.
    /// True when no log dir is left online.
    pub fn handle_log_dir_failure(&self, dir: &Path) -> bool {
        let mut offline: Vec<TopicPartition> = self.log_manager.handle_log_dir_failure(dir);
        {
            let mut hosted = self.partitions.write();
            for partitions in hosted.values_mut() {
                partitions.retain(|_, p| {
                    let failed = p.log_dir() == dir;
                    if failed {
                        offline.push(p.topic_partition.clone());
                    }
                    !failed
                });
            }
            hosted.retain(|_, partitions| !partitions.is_empty());
        }
        for tp in &offline {
            self.stop_fetching(tp);
        }
        let count = {
            let mut set = self.offline.write();
            set.extend(offline);
            set.len()
        };
        tracing::warn!(dir = %dir.display(), offline_partitions = count, "stopped the partitions of the failed log dir");
        self.all_log_dirs_offline()
    }

    pub fn all_log_dirs_offline(&self) -> bool {
        let channel = self.log_manager.failure_channel();
        self.log_manager
            .log_dirs()
            .iter()
            .all(|dir| channel.is_offline(dir))
    }

    /// Runs `handle_log_dir_failure` for each newly failed dir on a thread of its own (Kafka's
    /// LogDirFailureHandler); calls `halt` once every dir is offline. The thread ends with the
    /// replica manager.
    pub fn start_log_dir_failure_handler(
        self: &Arc<Self>,
        halt: impl Fn() + Send + 'static,
    ) -> std::io::Result<()> {
        let Some(receiver) = self.log_manager.failure_channel().take_receiver() else {
            return Ok(());
        };
        let manager: Weak<Self> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("krust-log-dir-failure".into())
            .spawn(move || {
                while let Ok(dir) = receiver.recv() {
                    let Some(manager) = manager.upgrade() else {
                        return;
                    };
                    if manager.handle_log_dir_failure(&dir) {
                        tracing::error!("shutting down the broker: every log dir has failed");
                        halt();
                    }
                }
            })
            .map(|_| ())
    }

    /// Appends records the broker writes itself (metadata log, group offsets) as one batch, as
    /// a coordinator: a hosted partition appends through `Partition` so its high watermark
    /// moves and waiting fetches wake.
    pub fn append_internal(
        &self,
        tp: &TopicPartition,
        batch: &[u8],
        now_ms: i64,
    ) -> Result<LogAppendInfo, InternalLogError> {
        let log = self.internal_log(tp)?;
        let hosted = self.partition(&tp.topic, tp.partition);
        let info = match hosted {
            Some(partition) => {
                // Kafka's coordinators append with acks=1 and wait for the high watermark
                // themselves, so min.insync.replicas does not refuse their writes.
                partition.append_records_to_leader(AppendOrigin::Coordinator, batch, 1, now_ms)?
            }
            None => log
                .lock()
                .append_as_leader_from(AppendOrigin::Coordinator, batch, 0, now_ms)
                .inspect_err(|error| {
                    if let AppendError::Storage(cause) = error {
                        self.log_manager
                            .failure_channel()
                            .maybe_add_offline_log_dir(&log_dir_of(&log), cause);
                    }
                })?,
        };
        let mut flushed = log.lock();
        flushed.flush().inspect_err(|error| {
            self.log_manager
                .failure_channel()
                .maybe_add_offline_log_dir(&log_dir_of(&log), error);
        })?;
        if tp.topic == METADATA_LOG_TOPIC {
            // The only voter has it on disk: committed (see metadata_log.rs).
            flushed.maybe_increment_high_watermark(info.last_offset + 1);
        }
        Ok(info)
    }

    /// Reads an internal log (no high-watermark bound beyond the log end).
    pub fn read_internal(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Bytes, InternalLogError> {
        let log = self.internal_log(tp)?;
        let log = log.lock();
        let end = log.log_end_offset();
        if offset >= end {
            return Ok(Bytes::new());
        }
        let plan = log.read_plan(offset, end)?;
        drop(log);
        Ok(plan
            .read(max_bytes, true)?
            .records
            .read_bytes()
            .map_err(ReadError::from)?)
    }

    pub fn internal_log_end_offset(&self, tp: &TopicPartition) -> Result<i64, InternalLogError> {
        Ok(self.internal_log(tp)?.lock().log_end_offset())
    }

    pub fn internal_log_start_offset(&self, tp: &TopicPartition) -> Result<i64, InternalLogError> {
        Ok(self.internal_log(tp)?.lock().log_start_offset())
    }

    /// A topic's internal log keeps its topic's config; the metadata log is the broker's own
    /// and takes `metadata_log_config`, also when it was loaded at start-up with the broker
    /// defaults.
    pub(crate) fn internal_log(&self, tp: &TopicPartition) -> Result<SharedLog, StorageError> {
        match self.log_manager.get(tp) {
            Some(log) if tp.topic != METADATA_LOG_TOPIC => Ok(log),
            Some(log) => {
                let wanted = self.metadata_log_config();
                let mut guard = log.lock();
                if guard.config() != &wanted {
                    // Loaded with the broker defaults at start-up.
                    guard.update_config(wanted)?;
                }
                drop(guard);
                Ok(log)
            }
            None if tp.topic == METADATA_LOG_TOPIC => {
                self.log_manager
                    .get_or_create(tp, None, self.metadata_log_config())
            }
            None => self
                .log_manager
                .get_or_create_keeping_config(tp, self.log_defaults.read().clone()),
        }
    }

    /// Flushes logs whose flush interval has passed.
    pub fn flush_dirty(&self, now_ms: i64) {
        if let Err(error) = self.log_manager.flush_dirty(now_ms) {
            tracing::error!("flushing logs failed: {error}");
        }
    }

    /// One retention pass over every log (Kafka's `cleanupLogs`).
    pub fn cleanup_logs(&self, now_ms: i64) {
        if let Err(error) = self.log_manager.cleanup_logs(now_ms) {
            tracing::error!("retention failed: {error}");
        }
    }

    /// Writes the recovery-point and log-start-offset checkpoints.
    pub fn checkpoint(&self) {
        if let Err(error) = self.log_manager.checkpoint() {
            tracing::error!("writing checkpoints failed: {error}");
        }
    }

    /// Writes the high-watermark checkpoint (`replication-offset-checkpoint`).
    pub fn checkpoint_high_watermarks(&self) {
        if let Err(error) = self.log_manager.checkpoint_high_watermarks() {
            tracing::error!("writing the high-watermark checkpoint failed: {error}");
        }
    }

    /// Flushes everything and writes checkpoints and the clean-shutdown marker; the fetchers
    /// stop first, so no follower append races the final flush.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        if let Some(fetchers) = self.fetchers.get() {
            fetchers.shutdown();
        }
        if let Some(mover) = self.log_dir_mover.get() {
            mover.shutdown();
        }
        self.log_manager.shutdown()
    }
}

/// A failed internal append or read.
#[derive(Debug, thiserror::Error)]
pub enum InternalLogError {
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

mod gauges;
mod log_dirs;
pub mod metadata_log;
mod replication;
pub use replication::NotReplicated;

#[cfg(test)]
mod tests;
