//! AlterReplicaLogDirs's answers on a broker with two log dirs, one of which has failed.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use krust_server::bridge::Bridge;
use krust_server::broker::Broker;
use krust_server::handlers::alter_replica_log_dirs;
use krust_server::settings::BrokerSettings;

fn move_to(path: &str, topic: &str, partitions: Vec<i32>) -> AlterReplicaLogDir {
    AlterReplicaLogDir::default()
        .with_path(StrBytes::from_string(path.to_string()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)])
}

#[test]
fn unknown_and_offline_dirs_and_partitions_not_hosted_answer_kafkas_codes() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let settings = BrokerSettings {
        log_dirs: dirs.iter().map(|d| d.path().to_path_buf()).collect(),
        ..BrokerSettings::default()
    };
    let broker = Broker::open(settings).unwrap();
    let (bridge, _receiver) = Bridge::new(BTreeMap::new());
    let context = broker.server_context(bridge);
    let manager = context.replicas.log_manager();
    manager
        .failure_channel()
        .maybe_add_offline_log_dir(dirs[1].path(), &"injected failure");
    let path = |i: usize| dirs[i].path().display().to_string();
    let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
        move_to("/not/a/log/dir", "a", vec![0]),
        move_to(&path(1), "b", vec![0]),
        move_to(&path(0), "c", vec![0, 1]),
        // The metadata log is in a log dir, but not a replica Kafka's tools can move.
        move_to(&path(0), "__cluster_metadata", vec![0]),
    ]);
    let response = alter_replica_log_dirs::handle(&context, request.clone());
    let codes: Vec<(String, i32, i16)> = response
        .results
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            (
                "__cluster_metadata".into(),
                0,
                ResponseError::ReplicaNotAvailable.code()
            ),
            ("a".into(), 0, ResponseError::LogDirNotFound.code()),
            ("b".into(), 0, ResponseError::KafkaStorageError.code()),
            ("c".into(), 0, ResponseError::ReplicaNotAvailable.code()),
            ("c".into(), 1, ResponseError::ReplicaNotAvailable.code()),
        ]
    );
    // Without ALTER on the cluster every partition is refused.
    let refused = alter_replica_log_dirs::cluster_authorization_failed(&request);
    assert!(refused
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.error_code == ResponseError::ClusterAuthorizationFailed.code()));
    assert_eq!(refused.results.len(), 4);
    // The metadata log stays where it is.
    assert!(manager.future_partitions().is_empty());
}
