//! What the fetcher puts on the wire and how it spreads and backs off, from its settings.

use std::collections::HashMap;

use krust_storage::{LogConfig, LogManager};
use tempfile::TempDir;
use uuid::Uuid;

use super::*;
use crate::metadata::metadata_cache::{BrokerEndpoint, MetadataImage};

fn partitions(count: i32) -> (TempDir, Vec<Arc<Partition>>) {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap();
    let partitions = (0..count)
        .map(|i| {
            let tp = TopicPartition::new("t", i);
            let log = manager
                .get_or_create(&tp, None, LogConfig::default())
                .unwrap();
            let failures = manager.failure_channel().clone();
            Arc::new(Partition::new(tp, Uuid::nil(), 2, 30_000, log, failures))
        })
        .collect();
    (dir, partitions)
}

fn config(settings: ReplicationSettings) -> FetcherConfig {
    FetcherConfig {
        node_id: 2,
        settings,
        listener_name: "REPLICATION".into(),
        security: Arc::default(),
        metadata: Arc::default(),
        replication_quotas: Arc::default(),
    }
}

fn thread(config: FetcherConfig, partitions: &[Arc<Partition>]) -> FetcherThread {
    let states = partitions
        .iter()
        .map(|p| {
            (
                p.topic_partition.clone(),
                FetchState {
                    partition: Arc::clone(p),
                    leader_epoch: 4,
                    fetch_offset: 0,
                    last_fetched_epoch: Some(3),
                    delayed_until: None,
                    lag: None,
                },
            )
        })
        .collect::<HashMap<_, _>>();
    FetcherThread {
        leader: 1,
        config,
        shared: Arc::new(FetcherShared {
            partitions: Mutex::new(states),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        }),
        connection: None,
    }
}

#[test]
fn a_replica_fetch_carries_the_replica_fetch_settings() {
    let (_dir, partitions) = partitions(1);
    let settings = ReplicationSettings {
        replica_fetch_max_bytes: 1_234,
        replica_fetch_response_max_bytes: 5_678,
        replica_fetch_wait_max_ms: 77,
        replica_fetch_min_bytes: 9,
        ..ReplicationSettings::default()
    };
    let (request, requested, _) = thread(config(settings), &partitions).build_fetch();
    assert_eq!(requested.len(), 1);
    assert_eq!(request.replica_id.0, 2);
    assert_eq!(
        (request.max_wait_ms, request.min_bytes, request.max_bytes),
        (77, 9, 5_678)
    );
    let partition = &request.topics[0].partitions[0];
    assert_eq!(partition.partition_max_bytes, 1_234);
    assert_eq!(
        (partition.current_leader_epoch, partition.last_fetched_epoch),
        (4, 3)
    );
}

#[test]
fn a_failed_partition_waits_replica_fetch_backoff_ms_before_it_is_fetched_again() {
    let (_dir, partitions) = partitions(2);
    let settings = ReplicationSettings {
        replica_fetch_backoff_ms: 60_000,
        ..ReplicationSettings::default()
    };
    let fetcher = thread(config(settings), &partitions);
    let before = Instant::now();
    let failed = partitions[0].topic_partition.clone();
    fetcher.back_off(std::iter::once(&failed));
    let delayed = fetcher.shared.partitions.lock()[&failed]
        .delayed_until
        .unwrap();
    assert!(delayed >= before + Duration::from_secs(60));
    let (_, requested, _) = fetcher.build_fetch();
    let fetched: Vec<_> = requested.iter().map(|r| r.tp.clone()).collect();
    assert_eq!(fetched, vec![partitions[1].topic_partition.clone()]);
}

#[test]
fn a_throttled_partition_out_of_sync_is_left_out_while_the_follower_quota_is_exceeded() {
    let (_dir, partitions) = partitions(2);
    let quotas = Arc::new(ReplicationQuotas::default());
    // Node 2 follows partition 0 throttled ("0:2"), partition 1 not.
    let throttled = HashMap::from([(
        "follower.replication.throttled.replicas".to_string(),
        "0:2,1:3".to_string(),
    )]);
    quotas.update_topic(2, "t", &throttled);
    quotas.follower.set_bound(1);
    let fetcher = thread(
        FetcherConfig {
            replication_quotas: Arc::clone(&quotas),
            ..config(ReplicationSettings::default())
        },
        &partitions,
    );
    let fetched = |fetcher: &FetcherThread| {
        let (_, requested, throttled) = fetcher.build_fetch();
        let mut tps: Vec<i32> = requested.iter().map(|r| r.tp.partition).collect();
        tps.sort();
        (tps, throttled)
    };
    // Within the quota every partition is fetched.
    assert_eq!(fetched(&fetcher), (vec![0, 1], false));
    quotas.follower.record(1 << 20, now_ms());
    assert_eq!(fetched(&fetcher), (vec![1], true));
    // Once the partition is in sync (no lag behind the leader's HW) it is fetched again.
    fetcher
        .shared
        .partitions
        .lock()
        .get_mut(&partitions[0].topic_partition)
        .unwrap()
        .lag = Some(0);
    assert_eq!(fetched(&fetcher), (vec![0, 1], false));
}

#[test]
fn the_leader_is_reached_at_its_inter_broker_listener_endpoint() {
    let metadata = Arc::new(MetadataCache::default());
    let endpoint = BrokerEndpoint {
        node_id: 1,
        host: "client-host".into(),
        port: 9092,
        rack: None,
        listeners: HashMap::from([("REPLICATION".to_string(), ("internal".to_string(), 9093))]),
    };
    metadata.replace(MetadataImage::new(
        "c".into(),
        1,
        0,
        vec![endpoint],
        Vec::new(),
    ));
    let fetcher = thread(
        FetcherConfig {
            metadata,
            ..config(ReplicationSettings::default())
        },
        &[],
    );
    assert_eq!(fetcher.leader_address().as_deref(), Some("internal:9093"));
}

#[test]
fn num_replica_fetchers_spreads_a_leaders_partitions_over_that_many_fetchers() {
    let (_dir, partitions) = partitions(24);
    for fetchers in [1, 3] {
        let manager = ReplicaFetcherManager::new(config(ReplicationSettings {
            num_replica_fetchers: fetchers,
            ..ReplicationSettings::default()
        }));
        for partition in &partitions {
            manager.add_partition(Arc::clone(partition), 1, 0);
        }
        assert_eq!(manager.fetchers.lock().len(), fetchers);
        assert_eq!(manager.fetch_offsets().len(), 24);
        for partition in &partitions {
            manager.remove_partition(&partition.topic_partition);
        }
        assert!(manager.fetchers.lock().is_empty(), "idle fetchers stop");
    }
}
