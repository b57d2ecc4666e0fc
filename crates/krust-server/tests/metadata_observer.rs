//! A broker-only node (`process.roles=broker`) observes the controller quorum: it copies the
//! committed metadata log from a voter over TCP on 127.0.0.1, replays its own copy after a
//! restart, and takes the voter's snapshot when the voter no longer has the entries it needs.
//! Every wait is bounded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krust_raft::state_machine::{AppliedRecord, Applier, ApplyError};
use krust_server::bridge::Bridge;
use krust_server::broker::Broker;
use krust_server::settings::{BrokerSettings, QuorumSettings};
use parking_lot::Mutex;
use tempfile::TempDir;

mod common;
use common::{free_port, listener};

const PATIENCE: Duration = Duration::from_secs(20);

/// What the node's controller side got: loaded snapshots and applied records.
#[derive(Default)]
struct Image {
    records: Mutex<Vec<(i64, Bytes)>>,
    loaded: Mutex<Vec<i64>>,
}

impl Applier for Image {
    fn apply(&self, records: Vec<AppliedRecord>) -> Result<(), ApplyError> {
        let mut held = self.records.lock();
        held.extend(records.into_iter().map(|r| (r.offset, r.value)));
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError> {
        Ok(Some(
            self.records.lock().iter().map(|(_, v)| v.clone()).collect(),
        ))
    }

    fn load_snapshot(&self, end_offset: i64, records: Vec<Bytes>) -> Result<(), ApplyError> {
        self.loaded.lock().push(end_offset);
        // The test's records are numbered by value; a snapshot keeps them, in order.
        *self.records.lock() = records
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i as i64 - 1_000_000, v))
            .collect();
        Ok(())
    }
}

impl Image {
    fn values(&self) -> Vec<Bytes> {
        self.records.lock().iter().map(|(_, v)| v.clone()).collect()
    }
}

/// Node 1 is the one voter, on its CONTROLLER listener; the others observe it.
fn settings(node_id: i32, dir: &TempDir, controller_port: u16) -> BrokerSettings {
    let client = listener("PLAINTEXT", free_port());
    let mut listeners = vec![client.clone()];
    if node_id == 1 {
        listeners.push(listener("CONTROLLER", controller_port));
    }
    BrokerSettings {
        node_id,
        listeners,
        advertised_listeners: vec![client],
        log_dirs: vec![dir.path().to_path_buf()],
        quorum: QuorumSettings {
            voters: vec![(1, "127.0.0.1".into(), controller_port)],
            process_roles: if node_id == 1 {
                vec!["broker".into(), "controller".into()]
            } else {
                vec!["broker".into()]
            },
            controller_listener_names: vec!["CONTROLLER".into()],
        },
        ..BrokerSettings::default()
    }
}

struct Node {
    broker: Arc<Broker>,
    image: Arc<Image>,
}

async fn start(settings: BrokerSettings) -> Node {
    let broker = Arc::new(Broker::open(settings).unwrap());
    let image = Arc::new(Image::default());
    broker.start_quorum(image.clone()).await.unwrap();
    let serving = Arc::clone(&broker);
    tokio::spawn(async move {
        let (bridge, _receiver) = Bridge::new(BTreeMap::new());
        serving.serve(bridge, None).await
    });
    Node { broker, image }
}

async fn stop(node: Node) {
    node.broker.shutdown();
    node.broker.quorum().unwrap().shutdown().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    node.broker.close().unwrap();
}

async fn propose(node: &Node, values: &[&str]) -> i64 {
    let records = values.iter().map(|v| Bytes::from(v.to_string())).collect();
    node.broker
        .quorum()
        .unwrap()
        .propose(records)
        .await
        .unwrap()
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn bytes_of(values: &[&str]) -> Vec<Bytes> {
    values.iter().map(|v| Bytes::from(v.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_copies_the_committed_log_replays_it_and_takes_a_snapshot() {
    let controller_port = free_port();
    let dirs: Vec<TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let voter = start(settings(1, &dirs[0], controller_port)).await;
    let first = ["a", "b", "c"];
    propose(&voter, &first).await;

    // An observer gets every committed record, with the voter's offsets, and knows the leader.
    let observer = start(settings(2, &dirs[1], controller_port)).await;
    wait_until("the observer has the records", || {
        observer.image.values() == bytes_of(&first)
    })
    .await;
    assert_eq!(
        observer.image.records.lock().clone(),
        voter.image.records.lock().clone()
    );
    let status = observer.broker.quorum().unwrap().status();
    assert_eq!((status.leader_id, status.is_leader), (1, false));
    let leader_view = voter.broker.quorum().unwrap().status();
    assert_eq!(
        leader_view
            .observers
            .iter()
            .map(|o| o.replica_id)
            .collect::<Vec<_>>(),
        vec![2]
    );
    // It is no controller: a proposal names the leader.
    let refused = observer
        .broker
        .quorum()
        .unwrap()
        .propose(vec![Bytes::from_static(b"x")])
        .await;
    assert!(matches!(
        refused,
        Err(krust_raft::quorum::QuorumError::NotLeader { leader_id: Some(1) })
    ));

    // After a restart it replays its own copy, then goes on fetching.
    stop(observer).await;
    let observer = start(settings(2, &dirs[1], controller_port)).await;
    assert_eq!(observer.image.values(), bytes_of(&first));
    let second = ["d", "e"];
    propose(&voter, &second).await;
    let all: Vec<Bytes> = bytes_of(&first)
        .into_iter()
        .chain(bytes_of(&second))
        .collect();
    wait_until("the restarted observer has the new records", || {
        observer.image.values() == all
    })
    .await;

    // The voter snapshots and drops the log below it: a new observer starts from the snapshot.
    let quorum = voter.broker.quorum().unwrap();
    quorum.trigger_snapshot().await.unwrap();
    let metadata_dir = dirs[0].path().join("__cluster_metadata-0");
    let snapshot_written = || {
        std::fs::read_dir(&metadata_dir).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".checkpoint")
        })
    };
    wait_until("the voter's snapshot", snapshot_written).await;
    let end = quorum.status().high_watermark;
    let log = voter.broker.metadata_log().unwrap();
    assert!(log.lock().maybe_increment_log_start_offset(end).unwrap());
    let late = start(settings(3, &dirs[2], controller_port)).await;
    propose(&voter, &["f"]).await;
    let everything: Vec<Bytes> = all.iter().cloned().chain(bytes_of(&["f"])).collect();
    wait_until(
        "the late observer has the snapshot and what followed",
        || late.image.values() == everything,
    )
    .await;
    assert_eq!(late.image.loaded.lock().clone(), vec![end]);

    stop(late).await;
    stop(observer).await;
    stop(voter).await;
}
