//! KRaft's metadata log, `__cluster_metadata-0`, as the replica manager hosts it on this
//! single-voter quorum: its log config and its snapshots (Kafka's KafkaMetadataLog). The
//! controller writes a snapshot of its image now and then; a restart loads the newest one and
//! replays only the log after it, and once a newer snapshot exists the log below it is deleted
//! as `metadata.max.retention.*` allow.
//!
//! Records appended here are committed as soon as they are flushed (this node is the only
//! voter), so the high watermark follows the log end.

use std::path::PathBuf;

use bytes::Bytes;
use krust_storage::batch::BatchHeader;
use krust_storage::config::{CleanupPolicy, LogConfig};
use krust_storage::error::StorageError;
use krust_storage::kraft_snapshot::{self, Snapshot, SnapshotId};
use krust_storage::log_manager::SharedLog;
use krust_storage::topic_partition::TopicPartition;
use parking_lot::Mutex;
use tracing::info;

use super::{InternalLogError, ReplicaManager};
use crate::metadata::metadata_log::METADATA_LOG_TOPIC;

/// The snapshots of the metadata log, oldest first; read from its directory on first use.
#[derive(Default)]
pub(crate) struct MetadataSnapshots {
    ids: Mutex<Option<Vec<SnapshotId>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Log(#[from] InternalLogError),
    #[error("a snapshot must end after the latest one ({latest:?}) and within the log (start {log_start_offset}, end {log_end_offset}); asked for end offset {end_offset}")]
    OutOfRange {
        end_offset: i64,
        latest: Option<SnapshotId>,
        log_start_offset: i64,
        log_end_offset: i64,
    },
}

impl From<StorageError> for SnapshotError {
    fn from(error: StorageError) -> Self {
        Self::Log(error.into())
    }
}

fn metadata_tp() -> TopicPartition {
    TopicPartition::new(METADATA_LOG_TOPIC, 0)
}

impl ReplicaManager {
    /// The broker defaults as the metadata log needs them: its own segment settings, no time
    /// or size retention (snapshots decide what goes, in `write_metadata_snapshot`) and never
    /// compacted (its records have no keys), whatever log.retention.* and log.cleanup.policy say.
    pub(crate) fn metadata_log_config(&self) -> LogConfig {
        let settings = &self.metadata_log_settings;
        LogConfig {
            segment_bytes: settings.segment_bytes,
            segment_ms: settings.segment_ms,
            retention_ms: -1,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::default(),
            ..self.log_defaults.read().clone()
        }
    }

    /// The newest metadata snapshot, read and checked, or `None` before the first.
    pub fn latest_metadata_snapshot(&self) -> Result<Option<Snapshot>, SnapshotError> {
        let log = self.metadata_log()?;
        let (dir, log_end_offset) = {
            let log = log.lock();
            (log.dir().to_path_buf(), log.log_end_offset())
        };
        let Some(id) = self.snapshot_ids(&log)?.last().copied() else {
            return Ok(None);
        };
        if id.end_offset > log_end_offset {
            // Kafka's follower case (a snapshot fetched, the log not yet truncated) cannot
            // happen on a single node: the log lost records the snapshot had.
            return Err(StorageError::Malformed {
                path: id.path(&dir),
                reason: format!(
                    "ends at {} beyond the log end {log_end_offset}",
                    id.end_offset
                ),
            }
            .into());
        }
        Ok(Some(kraft_snapshot::read_snapshot(&dir, id)?))
    }

    /// Writes a snapshot of the metadata records below `end_offset` (`records`: the image
    /// they add up to), then deletes older snapshots and the log below them while the log and
    /// its snapshots break `metadata.max.retention.bytes` / `.ms` (Kafka's cleanSnapshots).
    pub fn write_metadata_snapshot(
        &self,
        end_offset: i64,
        records: &[Bytes],
        now_ms: i64,
    ) -> Result<PathBuf, SnapshotError> {
        let log = self.metadata_log()?;
        let mut ids = self.snapshot_ids(&log)?;
        let (dir, log_start_offset, log_end_offset) = {
            let log = log.lock();
            (
                log.dir().to_path_buf(),
                log.log_start_offset(),
                log.log_end_offset(),
            )
        };
        let latest = ids.last().copied();
        if end_offset <= log_start_offset.max(latest.map_or(0, |id| id.end_offset))
            || end_offset > log_end_offset
        {
            return Err(SnapshotError::OutOfRange {
                end_offset,
                latest,
                log_start_offset,
                log_end_offset,
            });
        }
        let last = self.batch_holding(end_offset - 1)?;
        let id = SnapshotId {
            end_offset,
            epoch: last.partition_leader_epoch,
        };
        kraft_snapshot::write_snapshot(&dir, id, last.max_timestamp, records, now_ms)?;
        info!(snapshot = %id.file_name(), records = records.len(), "wrote a metadata snapshot");
        ids.push(id);
        let kept = self.clean_metadata_snapshots(&log, &dir, ids, now_ms)?;
        *self.metadata_snapshots.ids.lock() = Some(kept);
        Ok(id.path(&dir))
    }

    /// After the quorum wrote the snapshot `id`: the same retention as `write_metadata_snapshot`.
    pub(crate) fn metadata_snapshot_written(
        &self,
        id: SnapshotId,
        now_ms: i64,
    ) -> Result<(), SnapshotError> {
        let log = self.metadata_log()?;
        let mut ids = self.snapshot_ids(&log)?;
        if !ids.contains(&id) {
            ids.push(id);
            ids.sort();
        }
        let dir = log.lock().dir().to_path_buf();
        let kept = self.clean_metadata_snapshots(&log, &dir, ids, now_ms)?;
        *self.metadata_snapshots.ids.lock() = Some(kept);
        Ok(())
    }

    pub(crate) fn metadata_log(&self) -> Result<SharedLog, InternalLogError> {
        Ok(self.internal_log(&metadata_tp())?)
    }

    fn snapshot_ids(&self, log: &SharedLog) -> Result<Vec<SnapshotId>, StorageError> {
        let mut ids = self.metadata_snapshots.ids.lock();
        if let Some(ids) = ids.as_ref() {
            return Ok(ids.clone());
        }
        let (dir, log_start_offset) = {
            let log = log.lock();
            (log.dir().to_path_buf(), log.log_start_offset())
        };
        let recovered = kraft_snapshot::recover_snapshots(&dir, log_start_offset)?;
        *ids = Some(recovered.clone());
        Ok(recovered)
    }

    /// The header of the batch that holds `offset`.
    fn batch_holding(&self, offset: i64) -> Result<BatchHeader, SnapshotError> {
        let bytes = self.read_internal(&metadata_tp(), offset, 1)?;
        let header = BatchHeader::parse(&bytes).filter(|h| h.last_offset() >= offset);
        Ok(header.ok_or(StorageError::Malformed {
            path: METADATA_LOG_TOPIC.into(),
            reason: format!("no batch holds offset {offset}"),
        })?)
    }

    /// Kafka's cleanSnapshots: walking the snapshots oldest first, while one of them is over
    /// the size budget (log plus snapshots) or older than the time limit, the log before the
    /// next snapshot goes with it. The newest snapshot always stays. Returns the ids kept.
    fn clean_metadata_snapshots(
        &self,
        log: &SharedLog,
        dir: &std::path::Path,
        mut ids: Vec<SnapshotId>,
        now_ms: i64,
    ) -> Result<Vec<SnapshotId>, StorageError> {
        let settings = &self.metadata_log_settings;
        let mut total_bytes = log.lock().size_in_bytes();
        for id in &ids {
            total_bytes += kraft_snapshot::snapshot_size(dir, *id)?;
        }
        while ids.len() >= 2 {
            let oldest = ids[0];
            let over_size = u64::try_from(settings.max_retention_bytes)
                .is_ok_and(|budget| total_bytes > budget);
            let expired = settings.max_retention_ms >= 0
                && now_ms - kraft_snapshot::read_snapshot_timestamp(dir, oldest)?
                    > settings.max_retention_ms;
            if !(over_size || expired) {
                break;
            }
            let next = ids[1];
            let size_before = log.lock().size_in_bytes();
            if !log
                .lock()
                .maybe_increment_log_start_offset(next.end_offset)?
            {
                break;
            }
            self.log_manager()
                .delete_old_segments_of(&metadata_tp(), now_ms);
            self.log_manager().checkpoint()?;
            let removed = kraft_snapshot::snapshot_size(dir, oldest)?;
            let deleted = kraft_snapshot::rename_for_deletion(dir, oldest)?;
            let delay_ms = log.lock().config().file_delete_delay_ms;
            self.log_manager()
                .schedule_file_removal(vec![deleted], delay_ms);
            total_bytes -= removed + size_before.saturating_sub(log.lock().size_in_bytes());
            info!(snapshot = %oldest.file_name(), log_start_offset = next.end_offset, "deleted a metadata snapshot and the log before the next one");
            ids.remove(0);
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests;
