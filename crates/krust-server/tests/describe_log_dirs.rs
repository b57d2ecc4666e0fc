//! DescribeLogDirs on a broker with two log dirs, one of which has failed.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::DescribeLogDirsRequest;
use krust_server::bridge::Bridge;
use krust_server::broker::Broker;
use krust_server::handlers::describe_log_dirs;
use krust_server::settings::BrokerSettings;
use krust_storage::{LogConfig, TopicPartition};

#[test]
fn an_offline_log_dir_answers_a_storage_error_and_the_other_its_partitions() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let settings = BrokerSettings {
        log_dirs: dirs.iter().map(|d| d.path().to_path_buf()).collect(),
        ..BrokerSettings::default()
    };
    let broker = Broker::open(settings).unwrap();
    let (bridge, _receiver) = Bridge::new(BTreeMap::new());
    let context = broker.server_context(bridge);
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

    let response = describe_log_dirs::handle(
        &context,
        DescribeLogDirsRequest::default().with_topics(None),
    );
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
