//! The log dir apis (DescribeLogDirs, AlterReplicaLogDirs) on a broker with two log dirs, one of
//! which has failed.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, DescribeLogDirsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use krust_server::bridge::{Bridge, BridgeReceiver};
use krust_server::broker::Broker;
use krust_server::handlers::{alter_replica_log_dirs, describe_log_dirs};
use krust_server::server_context::ServerContext;
use krust_server::settings::BrokerSettings;
use krust_storage::{LogConfig, TopicPartition};

/// A broker on two temporary log dirs, with the context its handlers take. Fields drop in
/// order: the dirs go last.
struct TwoLogDirs {
    context: Arc<ServerContext>,
    _broker: Broker,
    _receiver: BridgeReceiver,
    dirs: [tempfile::TempDir; 2],
}

impl TwoLogDirs {
    fn open() -> TwoLogDirs {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let settings = BrokerSettings {
            log_dirs: dirs.iter().map(|d| d.path().to_path_buf()).collect(),
            ..BrokerSettings::default()
        };
        let broker = Broker::open(settings).unwrap();
        let (bridge, receiver) = Bridge::new(BTreeMap::new());
        TwoLogDirs {
            context: broker.server_context(bridge),
            _broker: broker,
            _receiver: receiver,
            dirs,
        }
    }
}

#[test]
fn an_offline_log_dir_answers_a_storage_error_and_the_other_its_partitions() {
    let node = TwoLogDirs::open();
    let (dirs, context) = (&node.dirs, &node.context);
    let manager = context.replicas.log_manager();
    let log = manager
        .get_or_create(&TopicPartition::new("t", 0), None, LogConfig::default())
        .unwrap();
    let holding = log.lock().dir().parent().unwrap().to_path_buf();
    // Fail the dir that does not hold the log.
    let (good, failed) = if holding == dirs[0].path() {
        (&dirs[0], &dirs[1])
    } else {
        (&dirs[1], &dirs[0])
    };
    manager
        .failure_channel()
        .maybe_add_offline_log_dir(failed.path(), &"injected failure");

    let response =
        describe_log_dirs::handle(context, DescribeLogDirsRequest::default().with_topics(None));
    let results: Vec<(String, i16, usize)> = response
        .results
        .iter()
        .map(|r| (r.log_dir.to_string(), r.error_code, r.topics.len()))
        .collect();
    let path = |dir: &tempfile::TempDir| dir.path().display().to_string();
    let expected: Vec<(String, i16, usize)> = dirs
        .iter()
        .map(|dir| {
            if dir.path() == good.path() {
                (path(dir), 0, 1)
            } else {
                (path(dir), ResponseError::KafkaStorageError.code(), 0)
            }
        })
        .collect();
    assert_eq!(results, expected);
    let online = response.results.iter().find(|r| r.error_code == 0).unwrap();
    assert!(online.total_bytes > 0 && online.usable_bytes > 0);
    assert_eq!(online.topics[0].name.0.as_str(), "t");
    let partition = &online.topics[0].partitions[0];
    assert_eq!(
        (partition.partition_index, partition.partition_size),
        (0, 0)
    );
    let offline = response.results.iter().find(|r| r.error_code != 0).unwrap();
    assert_eq!(offline.total_bytes, -1);
}

fn move_to(path: &str, topic: &str, partitions: Vec<i32>) -> AlterReplicaLogDir {
    AlterReplicaLogDir::default()
        .with_path(StrBytes::from_string(path.to_string()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)])
}

#[test]
fn unknown_and_offline_dirs_and_partitions_not_hosted_answer_kafkas_codes() {
    let node = TwoLogDirs::open();
    let (dirs, context) = (&node.dirs, &node.context);
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
    let response = alter_replica_log_dirs::handle(context, request.clone());
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
