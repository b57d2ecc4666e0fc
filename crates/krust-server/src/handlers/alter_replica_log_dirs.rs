//! AlterReplicaLogDirs (KIP-113): moves replicas of this broker to another of its log dirs
//! (`kafka-reassign-partitions` with `log_dirs`). The copy runs in the background
//! (`replica::replica_manager`'s mover); DescribeLogDirs shows the future replica meanwhile.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use krust_storage::TopicPartition;

use crate::server_context::ServerContext;

/// The partitions a request names with their destination; a partition named twice takes the
/// last one (Kafka reads them into a map).
fn requested_moves(request: &AlterReplicaLogDirsRequest) -> Vec<(TopicPartition, String)> {
    let mut moves: BTreeMap<TopicPartition, String> = BTreeMap::new();
    for dir in &request.dirs {
        for topic in &dir.topics {
            for partition in &topic.partitions {
                moves.insert(
                    TopicPartition::new(topic.name.0.as_str(), *partition),
                    dir.path.to_string(),
                );
            }
        }
    }
    moves.into_iter().collect()
}

fn response(results: Vec<(TopicPartition, i16)>) -> AlterReplicaLogDirsResponse {
    let mut by_topic: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for (tp, error_code) in results {
        by_topic.entry(tp.topic).or_default().push(
            AlterReplicaLogDirPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_error_code(error_code),
        );
    }
    AlterReplicaLogDirsResponse::default().with_results(
        by_topic
            .into_iter()
            .map(|(name, partitions)| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

/// Kafka's answer without ALTER on the cluster: every partition CLUSTER_AUTHORIZATION_FAILED.
pub fn cluster_authorization_failed(
    request: &AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let code = ResponseError::ClusterAuthorizationFailed.code();
    response(
        requested_moves(request)
            .into_iter()
            .map(|(tp, _)| (tp, code))
            .collect(),
    )
}

pub fn handle(
    context: &ServerContext,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let moves = requested_moves(&request);
    response(context.replicas.alter_replica_log_dirs(moves))
}
