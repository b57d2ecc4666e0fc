//! Partitions hosted by this broker: their logs, leader epochs and high watermarks.
//!
//! Appends and reads go through here so that the high watermark advances and waiting fetches
//! (see `purgatory`) are woken in one place, for client and internal writes alike.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use krust_storage::{
    AppendError, FetchDataInfo, Log, LogAppendInfo, LogConfig, LogManager, ReadError, StorageError,
    TimestampAndOffset, TopicPartition,
};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use uuid::Uuid;

use crate::metadata_cache::MetadataImage;
use crate::settings::topic_log_config;

/// Why a partition operation failed, as a Kafka error code.
pub type ErrorCode = i16;

/// A partition this broker hosts a replica of.
pub struct Partition {
    pub topic_partition: TopicPartition,
    pub topic_id: Uuid,
    log: Arc<Mutex<Log>>,
    leader_epoch: Mutex<i32>,
    is_leader: Mutex<bool>,
    /// Watched by delayed fetches; its value is the high watermark.
    high_watermark: watch::Sender<i64>,
}

impl Partition {
    fn new(topic_partition: TopicPartition, topic_id: Uuid, log: Arc<Mutex<Log>>) -> Self {
        let log_end = log.lock().log_end_offset();
        Partition {
            topic_partition,
            topic_id,
            log,
            leader_epoch: Mutex::new(0),
            is_leader: Mutex::new(true),
            high_watermark: watch::Sender::new(log_end),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        *self.leader_epoch.lock()
    }

    pub fn is_leader(&self) -> bool {
        *self.is_leader.lock()
    }

    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.lock().log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.lock().log_end_offset()
    }

    /// A receiver that sees every high-watermark change from now on.
    pub fn watch_high_watermark(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    /// Appends a produced batch set as leader; on one replica the high watermark follows the
    /// log end at once (the ISR is this broker alone).
    pub fn append_as_leader(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<LogAppendInfo, AppendError> {
        let epoch = self.leader_epoch();
        let (info, log_end) = {
            let mut log = self.log.lock();
            let info = log.append_as_leader(records, epoch, now_ms)?;
            (info, log.log_end_offset())
        };
        self.high_watermark.send_if_modified(|hw| {
            let advanced = *hw < log_end;
            *hw = log_end;
            advanced
        });
        Ok(info)
    }

    /// Reads whole batches from `offset`, up to the high watermark.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, ReadError> {
        let hw = self.high_watermark();
        // Plan under the lock, read the files without it.
        let plan = self.log.lock().read_plan(offset, hw)?;
        plan.read(max_bytes, min_one_batch)
    }

    /// The first offset whose timestamp is at or after `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampAndOffset>, ReadError> {
        self.log.lock().fetch_offset_by_timestamp(timestamp)
    }

    /// The record with the largest timestamp (ListOffsets -3, KIP-734).
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampAndOffset>, ReadError> {
        self.log.lock().offset_of_max_timestamp()
    }
}

/// All partitions hosted here, reconciled with each new metadata image.
pub struct ReplicaManager {
    node_id: i32,
    log_manager: LogManager,
    log_defaults: LogConfig,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
}

impl ReplicaManager {
    pub fn new(node_id: i32, log_manager: LogManager, log_defaults: LogConfig) -> Self {
        ReplicaManager {
            node_id,
            log_manager,
            log_defaults,
            partitions: RwLock::new(HashMap::new()),
        }
    }

    pub fn log_manager(&self) -> &LogManager {
        &self.log_manager
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .get(&TopicPartition::new(topic, partition))
            .cloned()
    }

    /// Creates logs for partitions newly placed on this broker, updates epochs and configs, and
    /// deletes the logs of topics that are gone from the image.
    pub fn apply_image(&self, image: &MetadataImage) -> Result<(), StorageError> {
        let mut wanted = HashSet::new();
        for topic in image.topics.values() {
            let config = topic_log_config(&self.log_defaults, &topic.configs);
            for placement in &topic.partitions {
                if !placement.replicas.contains(&self.node_id) {
                    continue;
                }
                let tp = TopicPartition::new(&topic.name, placement.partition);
                wanted.insert(tp.clone());
                let existing = self.partitions.read().get(&tp).cloned();
                let partition = match existing {
                    Some(partition) => {
                        partition.log.lock().update_config(config.clone())?;
                        partition
                    }
                    None => {
                        let log = self.log_manager.get_or_create(
                            &tp,
                            Some(*topic.topic_id.as_bytes()),
                            config.clone(),
                        )?;
                        let partition = Arc::new(Partition::new(tp.clone(), topic.topic_id, log));
                        self.partitions.write().insert(tp, partition.clone());
                        partition
                    }
                };
                *partition.leader_epoch.lock() = placement.leader_epoch;
                *partition.is_leader.lock() = placement.leader == self.node_id;
            }
        }
        let removed: Vec<TopicPartition> = self
            .partitions
            .read()
            .keys()
            .filter(|tp| !wanted.contains(*tp))
            .cloned()
            .collect();
        for tp in removed {
            self.partitions.write().remove(&tp);
            self.log_manager.delete(&tp)?;
        }
        Ok(())
    }

    /// Appends records the broker writes itself (metadata log, group offsets) as one batch.
    pub fn append_internal(
        &self,
        tp: &TopicPartition,
        batch: &[u8],
        now_ms: i64,
    ) -> Result<LogAppendInfo, InternalLogError> {
        let log = self.internal_log(tp)?;
        // A hosted partition appends through `Partition` so its high watermark moves and
        // waiting fetches wake; it shares the same log.
        let hosted = self.partitions.read().get(tp).cloned();
        let info = match hosted {
            Some(partition) => partition.append_as_leader(batch, now_ms)?,
            None => log.lock().append_as_leader(batch, 0, now_ms)?,
        };
        log.lock().flush()?;
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

    fn internal_log(&self, tp: &TopicPartition) -> Result<Arc<Mutex<Log>>, StorageError> {
        match self.log_manager.get(tp) {
            Some(log) => Ok(log),
            None => self
                .log_manager
                .get_or_create(tp, None, self.log_defaults.clone()),
        }
    }

    /// Flushes logs whose flush interval has passed.
    pub fn flush_dirty(&self, now_ms: i64) {
        if let Err(error) = self.log_manager.flush_dirty(now_ms) {
            tracing::error!("flushing logs failed: {error}");
        }
    }

    /// Writes the recovery-point and log-start-offset checkpoints.
    pub fn checkpoint(&self) {
        if let Err(error) = self.log_manager.checkpoint() {
            tracing::error!("writing checkpoints failed: {error}");
        }
    }

    /// Flushes everything and writes checkpoints and the clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.log_manager.shutdown()
    }
}

/// A failed internal append or read.
#[derive(Debug, thiserror::Error)]
pub enum InternalLogError {
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}
