//! DescribeQuorum (KIP-595, KIP-853's v2 nodes): the controller quorum of
//! `__cluster_metadata-0` as its leader sees it; NOT_LEADER_OR_FOLLOWER from any other node,
//! as Kafka's KafkaRaftClient answers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use krust_raft::quorum::{QuorumStatus, ReplicaStatus};

use crate::controller_channel::controller_quorum::own_quorum_listener;
use crate::metadata::metadata_log::METADATA_LOG_TOPIC;
use crate::server_context::ServerContext;

fn names_the_metadata_partition(request: &DescribeQuorumRequest) -> bool {
    matches!(request.topics.as_slice(), [topic]
        if topic.topic_name.0.as_str() == METADATA_LOG_TOPIC
            && matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0))
}

fn replica(status: &ReplicaStatus) -> ReplicaState {
    ReplicaState::default()
        .with_replica_id(BrokerId(status.replica_id))
        .with_log_end_offset(status.log_end_offset)
        .with_last_fetch_timestamp(status.last_fetch_timestamp)
        .with_last_caught_up_timestamp(status.last_caught_up_timestamp)
}

fn partition(status: Option<&QuorumStatus>) -> PartitionData {
    let data = PartitionData::default().with_partition_index(0);
    let Some(status) = status.filter(|s| s.is_leader) else {
        return data
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_leader_id(BrokerId(status.map_or(-1, |s| s.leader_id)))
            .with_leader_epoch(status.map_or(-1, |s| s.leader_epoch));
    };
    data.with_leader_id(BrokerId(status.leader_id))
        .with_leader_epoch(status.leader_epoch)
        .with_high_watermark(status.high_watermark)
        .with_current_voters(status.voters.iter().map(replica).collect())
        .with_observers(status.observers.iter().map(replica).collect())
}

/// The answer for a caller allowed to DESCRIBE the cluster.
pub fn handle(context: &ServerContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse {
    let topic = TopicName(StrBytes::from_static_str(METADATA_LOG_TOPIC));
    if !names_the_metadata_partition(&request) {
        let partition =
            PartitionData::default().with_error_code(ResponseError::UnknownTopicOrPartition.code());
        return DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
            .with_topic_name(topic)
            .with_partitions(vec![partition])]);
    }
    let quorum = context.quorum.get();
    let status = quorum.map(|q| q.status());
    // The voters' listener: the controller listener, or for a quorum of one the listener it
    // is reached on, so the endpoint advertised is one that serves the quorum.
    let settings = &context.settings;
    let listener = if settings.clustered() {
        settings.quorum.controller_listener_names.first().cloned()
    } else {
        own_quorum_listener(settings).map(|l| l.name.clone())
    }
    .unwrap_or_else(|| "CONTROLLER".into());
    let nodes = quorum
        .map(|q| {
            q.voters()
                .voters()
                .iter()
                .map(|v| {
                    let endpoint = Listener::default()
                        .with_name(StrBytes::from_string(listener.clone()))
                        .with_host(StrBytes::from_string(v.host.clone()))
                        .with_port(v.port);
                    Node::default()
                        .with_node_id(BrokerId(v.id))
                        .with_listeners(vec![endpoint])
                })
                .collect()
        })
        .unwrap_or_default();
    let topic = TopicData::default()
        .with_topic_name(topic)
        .with_partitions(vec![partition(status.as_ref())]);
    DescribeQuorumResponse::default()
        .with_topics(vec![topic])
        .with_nodes(nodes)
}

/// CLUSTER_AUTHORIZATION_FAILED, for a caller that may not DESCRIBE the cluster.
pub fn cluster_authorization_failed() -> DescribeQuorumResponse {
    DescribeQuorumResponse::default()
        .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
}
