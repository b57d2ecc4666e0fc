//! DescribeLogDirs (KIP-113, KIP-827): each log dir with its partitions' sizes and the disk's
//! total and usable bytes; an offline dir answers KAFKA_STORAGE_ERROR. A replica being moved
//! to another log dir is listed there too, as a future replica with its lag.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use krust_storage::{LogManager, TopicPartition};

use crate::metadata::metadata_log::METADATA_LOG_TOPIC;
use crate::server_context::ServerContext;

/// Partitions of one log dir, by topic.
type DirTopics = BTreeMap<String, Vec<DescribeLogDirsPartition>>;

/// Kafka's answer without DESCRIBE on the cluster: an error (v3+) and no log dirs.
pub fn cluster_authorization_failed() -> DescribeLogDirsResponse {
    DescribeLogDirsResponse::default()
        .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
}

pub fn handle(context: &ServerContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    // A null topic list asks for every partition.
    let wanted: Option<HashSet<TopicPartition>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.topic.0.as_str(), *p))
            })
            .collect()
    });
    let manager = context.replicas.log_manager();
    let mut by_dir = partitions_by_dir(manager, wanted.as_ref());
    let failures = manager.failure_channel();
    let results = manager
        .log_dirs()
        .iter()
        .map(|dir| {
            let result = DescribeLogDirsResult::default().with_log_dir(StrBytes::from_string(
                std::path::absolute(dir)
                    .unwrap_or_else(|_| dir.clone())
                    .display()
                    .to_string(),
            ));
            if failures.is_offline(dir) {
                return result.with_error_code(ResponseError::KafkaStorageError.code());
            }
            let (total_bytes, usable_bytes) = match disk_space(dir) {
                Ok(space) => space,
                Err(error) => {
                    tracing::warn!("cannot read the disk space of {}: {error}", dir.display());
                    return result.with_error_code(ResponseError::KafkaStorageError.code());
                }
            };
            let topics = by_dir
                .remove(dir)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, partitions)| {
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect();
            result
                .with_topics(topics)
                .with_total_bytes(total_bytes)
                .with_usable_bytes(usable_bytes)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

/// The wanted partitions' logs (all if `wanted` is None), current and future (a replica
/// being moved to another log dir), grouped by the log dir holding them.
fn partitions_by_dir(
    manager: &LogManager,
    wanted: Option<&HashSet<TopicPartition>>,
) -> BTreeMap<PathBuf, DirTopics> {
    let mut by_dir: BTreeMap<PathBuf, DirTopics> = BTreeMap::new();
    let futures = manager.future_partitions().into_iter().map(|tp| (tp, true));
    let currents = manager.all_partitions().into_iter().map(|tp| (tp, false));
    for (tp, is_future) in currents.chain(futures) {
        // KRaft keeps the metadata log outside Kafka's LogManager, so Kafka never lists it.
        if tp.topic == METADATA_LOG_TOPIC || wanted.is_some_and(|w| !w.contains(&tp)) {
            continue;
        }
        let Some(partition) = describe_partition(manager, &tp, is_future) else {
            continue;
        };
        by_dir
            .entry(partition.0)
            .or_default()
            .entry(tp.topic.clone())
            .or_default()
            .push(partition.1);
    }
    by_dir
}

/// One replica's log dir and description; `None` if it is gone.
fn describe_partition(
    manager: &LogManager,
    tp: &TopicPartition,
    is_future: bool,
) -> Option<(PathBuf, DescribeLogDirsPartition)> {
    let current_end = manager.get(tp).map(|log| log.lock().log_end_offset());
    let log = if is_future {
        manager.future_log(tp)?
    } else {
        manager.get(tp)?
    };
    let log = log.lock();
    let dir = log.dir().parent()?.to_path_buf();
    let offset_lag = if is_future {
        // Kafka's lag of a future replica: how far it trails the current replica's log end.
        (current_end.unwrap_or(0) - log.log_end_offset()).max(0)
    } else {
        // Kafka's lag of a current replica: how far its high watermark trails its log end,
        // never negative.
        (log.high_watermark() - log.log_end_offset()).max(0)
    };
    let partition = DescribeLogDirsPartition::default()
        .with_partition_index(tp.partition)
        .with_partition_size(i64::try_from(log.size_in_bytes()).unwrap_or(i64::MAX))
        .with_offset_lag(offset_lag)
        .with_is_future_key(is_future);
    Some((dir, partition))
}

/// The file system's total and usable bytes (KIP-827), capped at i64::MAX as Kafka does.
fn disk_space(dir: &Path) -> std::io::Result<(i64, i64)> {
    let stat = rustix::fs::statvfs(dir)?;
    let bytes =
        |blocks: u64| i64::try_from(blocks.saturating_mul(stat.f_frsize)).unwrap_or(i64::MAX);
    Ok((bytes(stat.f_blocks), bytes(stat.f_bavail)))
}
