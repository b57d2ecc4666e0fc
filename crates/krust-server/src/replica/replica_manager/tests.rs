//! Applying metadata deltas and failed log dirs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tempfile::TempDir;

use super::*;
use crate::metadata::metadata_cache::BrokerEndpoint;
use crate::partition::{PartitionState, Role};

const LOCAL: i32 = 1;

fn manager(dirs: &[PathBuf]) -> ReplicaManager {
    let log_manager = LogManager::open(dirs, LogConfig::default()).unwrap();
    ReplicaManager::new(
        LOCAL,
        log_manager,
        LogConfig::default(),
        MetadataLogSettings::default(),
    )
}

fn one_dir() -> (TempDir, ReplicaManager) {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(&[dir.path().to_path_buf()]);
    (dir, manager)
}

fn placement(partition: i32, leader: i32, epoch: i32, replicas: &[i32]) -> PartitionMetadata {
    PartitionMetadata {
        partition,
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
    }
}

fn topic(
    name: &str,
    id: u128,
    configs: &[(&str, &str)],
    partitions: Vec<PartitionMetadata>,
) -> TopicMetadata {
    TopicMetadata {
        name: name.to_string(),
        topic_id: Uuid::from_u128(id),
        internal: false,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        partitions,
    }
}

fn delta(offset: i64, topics: Vec<TopicMetadata>, deleted: &[u128]) -> MetadataDelta {
    MetadataDelta {
        metadata_offset: offset,
        controller_id: LOCAL,
        brokers: None,
        topics,
        deleted_topic_ids: deleted.iter().map(|id| Uuid::from_u128(*id)).collect(),
        finalized_features: None,
        log_defaults: None,
    }
}

/// Each hosted partition's state and log config, comparable across managers.
fn hosted(manager: &ReplicaManager) -> BTreeMap<String, (PartitionState, LogConfig)> {
    let topics = manager.partitions.read();
    topics
        .values()
        .flat_map(|partitions| partitions.values())
        .map(|p| {
            let config = manager
                .log_manager
                .get(&p.topic_partition)
                .unwrap()
                .lock()
                .config()
                .clone();
            (p.topic_partition.to_string(), (p.state(), config))
        })
        .collect()
}

#[test]
fn deltas_give_the_same_cache_and_partitions_as_the_full_image() {
    let broker = BrokerEndpoint {
        node_id: LOCAL,
        host: "h".into(),
        port: 9092,
        rack: None,
        listeners: Default::default(),
    };
    let a = |partitions| topic("a", 1, &[], partitions);
    let b = |configs: &[(&str, &str)], partitions| topic("b", 2, configs, partitions);
    let deltas = vec![
        MetadataDelta {
            brokers: Some(vec![broker.clone()]),
            ..delta(
                1,
                vec![a(vec![
                    placement(0, LOCAL, 0, &[LOCAL]),
                    placement(1, LOCAL, 0, &[LOCAL]),
                ])],
                &[],
            )
        },
        delta(
            2,
            vec![b(
                &[("segment.bytes", "2000000")],
                vec![placement(0, LOCAL, 0, &[LOCAL])],
            )],
            &[],
        ),
        // CreatePartitions, then a leader moving away, then a config change with no partition.
        delta(3, vec![a(vec![placement(2, LOCAL, 0, &[LOCAL])])], &[]),
        delta(4, vec![a(vec![placement(1, 2, 1, &[LOCAL, 2])])], &[]),
        delta(5, vec![b(&[("segment.bytes", "3000000")], vec![])], &[]),
        delta(
            6,
            vec![topic("c", 3, &[], vec![placement(0, 2, 0, &[2])])],
            &[2],
        ),
    ];
    let (_d1, by_delta) = one_dir();
    let mut image = MetadataImage::default();
    for delta in &deltas {
        by_delta.apply_delta(&image, delta).unwrap();
        image.apply_delta(delta);
    }

    let full = MetadataImage::new(
        String::new(),
        LOCAL,
        6,
        vec![broker],
        vec![
            a(vec![
                placement(0, LOCAL, 0, &[LOCAL]),
                placement(1, 2, 1, &[LOCAL, 2]),
                placement(2, LOCAL, 0, &[LOCAL]),
            ]),
            topic("c", 3, &[], vec![placement(0, 2, 0, &[2])]),
        ],
    );
    assert_eq!(image, full);
    let (_d2, by_image) = one_dir();
    by_image.apply_image(&full).unwrap();
    let states = hosted(&by_delta);
    assert_eq!(states, hosted(&by_image));
    assert_eq!(states.keys().collect::<Vec<_>>(), ["a-0", "a-1", "a-2"]);
    assert_eq!(states["a-1"].0.role, Role::Follower);
    assert!(by_delta
        .log_manager
        .get(&TopicPartition::new("b", 0))
        .is_none());
    assert_eq!(by_delta.leader_partition("b", 0).err(), Some(3));
    assert_eq!(by_delta.leader_partition("a-1", 0).err(), Some(3));
    assert_eq!(by_delta.leader_partition("a", 1).err(), Some(6));
}

#[test]
fn a_config_change_reaches_every_hosted_partition_of_the_topic() {
    let (_dir, manager) = one_dir();
    let partitions = vec![
        placement(0, LOCAL, 0, &[LOCAL]),
        placement(1, LOCAL, 0, &[LOCAL]),
    ];
    let before = MetadataImage::default();
    let created = delta(1, vec![topic("t", 1, &[], partitions)], &[]);
    manager.apply_delta(&before, &created).unwrap();
    let mut image = before;
    image.apply_delta(&created);
    let change = delta(
        2,
        vec![topic("t", 1, &[("segment.bytes", "2000000")], vec![])],
        &[],
    );
    manager.apply_delta(&image, &change).unwrap();
    for (_, (_, config)) in hosted(&manager) {
        assert_eq!(config.segment_bytes, 2_000_000);
    }
}

#[test]
fn a_log_dir_that_fails_during_a_change_goes_offline_and_the_rest_applies() {
    let root = tempfile::tempdir().unwrap();
    let dirs = vec![root.path().join("d1"), root.path().join("d2")];
    let manager = manager(&dirs);
    // d1 (with its .lock) is replaced by a file: creating a log there fails with an I/O error.
    std::fs::remove_dir_all(&dirs[0]).unwrap();
    std::fs::write(&dirs[0], b"not a directory").unwrap();
    let partitions = (0..3).map(|p| placement(p, LOCAL, 0, &[LOCAL])).collect();
    let created = delta(1, vec![topic("t", 1, &[], partitions)], &[]);
    manager
        .apply_delta(&MetadataImage::default(), &created)
        .unwrap();

    let channel = manager.log_manager.failure_channel();
    assert_eq!(channel.offline_dirs(), vec![dirs[0].clone()]);
    // New logs are spread over both dirs and created together: those placed in d1 (0 and 2)
    // go offline, as in Kafka, and the one in d2 is created.
    assert_eq!(manager.leader_partition("t", 0).err(), Some(56));
    assert_eq!(manager.leader_partition("t", 2).err(), Some(56));
    let hosted = manager.leader_partition("t", 1).unwrap();
    assert_eq!(hosted.log_dir(), dirs[1]);
    // A later change to the offline partition does not re-create its log in the other dir.
    let moved = delta(
        2,
        vec![topic("t", 1, &[], vec![placement(0, LOCAL, 1, &[LOCAL])])],
        &[],
    );
    let mut image = MetadataImage::default();
    image.apply_delta(&created);
    manager.apply_delta(&image, &moved).unwrap();
    assert_eq!(manager.leader_partition("t", 0).err(), Some(56));
    assert!(manager
        .log_manager
        .get(&TopicPartition::new("t", 0))
        .is_none());
    assert!(!manager.handle_log_dir_failure(&dirs[0]));
    channel.maybe_add_offline_log_dir(&dirs[1], &"disk full");
    assert!(manager.handle_log_dir_failure(&dirs[1]));
    assert_eq!(manager.leader_partition("t", 1).err(), Some(56));
    assert!(manager.all_log_dirs_offline());
}

#[test]
fn the_failure_handler_halts_once_every_log_dir_is_offline() {
    let (dir, manager) = one_dir();
    let manager = Arc::new(manager);
    let (halted, halts) = std::sync::mpsc::channel();
    manager
        .start_log_dir_failure_handler(move || halted.send(()).unwrap())
        .unwrap();
    let created = delta(
        1,
        vec![topic("t", 1, &[], vec![placement(0, LOCAL, 0, &[LOCAL])])],
        &[],
    );
    manager
        .apply_delta(&MetadataImage::default(), &created)
        .unwrap();
    manager
        .log_manager
        .failure_channel()
        .maybe_add_offline_log_dir(dir.path(), &"disk full");
    halts
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    assert!(manager.partition("t", 0).is_none());
    assert_eq!(manager.leader_partition("t", 0).err(), Some(56));
}

#[test]
fn internal_appends_are_coordinator_appends_that_may_write_control_batches() {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let marker = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: 7,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: Some(bytes::Bytes::from_static(&[0, 0, 0, 0])),
        value: Some(bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
        headers: Default::default(),
    };
    let mut batch = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut batch, [&marker], &options).unwrap();
    let (_dir, manager) = one_dir();
    let tp = TopicPartition::new("__transaction_state", 0);
    let info = manager.append_internal(&tp, &batch, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 0));
}

#[test]
fn a_changed_broker_default_reaches_every_topic_without_an_override_live() {
    let (_dir, manager) = one_dir();
    let created = delta(
        1,
        vec![
            topic("plain", 1, &[], vec![placement(0, LOCAL, 0, &[LOCAL])]),
            topic(
                "pinned",
                2,
                &[("max.message.bytes", "5000")],
                vec![placement(0, LOCAL, 0, &[LOCAL])],
            ),
        ],
        &[],
    );
    let mut image = MetadataImage::default();
    manager.apply_delta(&image, &created).unwrap();
    image.apply_delta(&created);
    let max_message_bytes = |topic: &str| {
        let log = manager
            .log_manager
            .get(&TopicPartition::new(topic, 0))
            .unwrap();
        let bytes = log.lock().config().max_message_bytes;
        bytes
    };
    assert_eq!(max_message_bytes("plain"), 1_048_588);

    let defaults = HashMap::from([
        ("max.message.bytes".to_string(), "1000".to_string()),
        ("segment.bytes".to_string(), "2000000".to_string()),
    ]);
    let changed = MetadataDelta {
        log_defaults: Some(defaults),
        ..delta(2, vec![], &[])
    };
    manager.apply_delta(&image, &changed).unwrap();
    image.apply_delta(&changed);
    assert_eq!(max_message_bytes("plain"), 1000);
    assert_eq!(max_message_bytes("pinned"), 5000);
    let plain = manager
        .log_manager
        .get(&TopicPartition::new("pinned", 0))
        .unwrap();
    assert_eq!(plain.lock().config().segment_bytes, 2_000_000);

    // A topic created later takes the dynamic default too.
    let later = delta(
        3,
        vec![topic(
            "later",
            3,
            &[],
            vec![placement(0, LOCAL, 0, &[LOCAL])],
        )],
        &[],
    );
    manager.apply_delta(&image, &later).unwrap();
    assert_eq!(max_message_bytes("later"), 1000);
}

#[test]
fn replica_lag_time_max_ms_decides_when_a_silent_follower_leaves_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(&[dir.path().to_path_buf()]).with_replication_settings(
        crate::settings::ReplicationSettings {
            replica_lag_time_max_ms: 60_000,
            ..Default::default()
        },
    );
    let started = crate::clock::now_ms();
    manager
        .apply_delta(
            &MetadataImage::default(),
            &delta(
                1,
                vec![topic(
                    "t",
                    1,
                    &[],
                    vec![placement(0, LOCAL, 0, &[LOCAL, 2])],
                )],
                &[],
            ),
        )
        .unwrap();
    let partition = manager.partition("t", 0).unwrap();
    // Follower 2 never fetches: it stays in the ISR for replica.lag.time.max.ms.
    manager.maybe_shrink_isrs(started + 30_000);
    assert!(partition.state().pending_isr.is_none());
    manager.maybe_shrink_isrs(started + 120_000);
    let pending = partition.state().pending_isr.expect("a shrink is proposed");
    assert_eq!(pending.new_isr, vec![LOCAL]);
}

/// A follower copies its leader while there is one; with no leader (-1) it fetches nothing.
#[test]
fn a_follower_is_fetched_only_while_its_partition_has_a_leader() {
    use crate::replica::alter_partition::{AlterPartitionManager, AlterPartitionSender};
    use crate::replica::replica_fetcher::{FetcherConfig, ReplicaFetcherManager};
    struct Unreachable;
    impl AlterPartitionSender for Unreachable {
        fn send(
            &self,
            _: kafka_protocol::messages::AlterPartitionRequest,
        ) -> crate::replica::alter_partition::AlterPartitionFuture {
            Box::pin(async {
                Err(crate::replica::alter_partition::AlterPartitionSendError(
                    "down".into(),
                ))
            })
        }
    }
    let (_dir, manager) = one_dir();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    manager.start_replication(
        ReplicaFetcherManager::new(FetcherConfig {
            node_id: LOCAL,
            settings: Default::default(),
            listener_name: "PLAINTEXT".into(),
            security: Arc::default(),
            metadata: Arc::default(),
            replication_quotas: Arc::default(),
        }),
        AlterPartitionManager::new(LOCAL, Arc::new(Unreachable), runtime.handle().clone()),
    );
    let placed = |leader, epoch| {
        delta(
            1,
            vec![topic(
                "t",
                1,
                &[],
                vec![placement(0, leader, epoch, &[LOCAL, 2])],
            )],
            &[],
        )
    };
    let fetched = || manager.fetchers().unwrap().fetch_offsets().len();
    manager
        .apply_delta(&MetadataImage::default(), &placed(2, 1))
        .unwrap();
    assert_eq!(fetched(), 1);
    manager
        .apply_delta(&MetadataImage::default(), &placed(-1, 2))
        .unwrap();
    assert_eq!(fetched(), 0);
    manager
        .apply_delta(&MetadataImage::default(), &placed(LOCAL, 3))
        .unwrap();
    assert_eq!(fetched(), 0, "a leader fetches nothing");
    manager.shutdown().unwrap();
}
