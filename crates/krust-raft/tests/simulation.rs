//! A deterministic simulation of the quorum: 3 and 5 voters in one process on tokio's paused
//! clock, an in-memory network that delays and drops messages at random, nodes crashing and
//! restarting on the storage they had, all driven by a seeded RNG for a bounded number of
//! steps. Checked: at most one leader per term; an acknowledged proposal is never lost or
//! changed; what nodes applied are prefixes of each other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use krust_raft::quorum::{self, QuorumError, QuorumSettings};
use krust_raft::state_machine::{AppliedRecord, Applier, ApplyError};
use krust_raft::{
    KRaft, KafkaLogBackend, LogBackend, LogStore, MemLogBackend, NodeId, Raft, StateMachine,
    StaticVoters, Voter,
};
use krust_storage::{LoadParams, Log, LogConfig, TopicPartition};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{AnyError, RaftNetworkFactory, RaftNetworkV2, ServerState};
use parking_lot::Mutex;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The applied image of a node: (offset, value) in apply order. A proposal of several values
/// is a metadata transaction as the controller writes one: its first value begins it
/// (`TXN_BEGIN`), its last ends it (`TXN_END`); a value that comes while one is open (a new
/// leader's, after a partial commit) ends it, as the new controller's abort does.
#[derive(Default)]
struct TestApplier {
    image: Mutex<Vec<(i64, Bytes)>>,
    in_transaction: Mutex<bool>,
}

const TXN_BEGIN: &str = "begin:";
const TXN_INSIDE: &str = "in:";
const TXN_END: &str = "end:";

/// Whether a transaction is open after `value`, when `open` told so before it.
fn open_after(open: bool, value: &[u8]) -> bool {
    if value.starts_with(TXN_BEGIN.as_bytes()) {
        true
    } else if value.starts_with(TXN_INSIDE.as_bytes()) {
        open
    } else {
        false
    }
}

/// A proposal of `count` values: a transaction when there are several.
fn proposal_values(seed: u64, step: u64, count: u64) -> Vec<Bytes> {
    (0..count)
        .map(|i| {
            let marker = match (count, i) {
                (1, _) => "",
                (_, 0) => TXN_BEGIN,
                (_, i) if i + 1 == count => TXN_END,
                _ => TXN_INSIDE,
            };
            Bytes::from(format!("{marker}s{seed}-{step}-{i}"))
        })
        .collect()
}

fn encode(offset: i64, value: &Bytes) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i64(offset);
    out.extend_from_slice(value);
    out.freeze()
}

impl Applier for TestApplier {
    fn apply(&self, records: Vec<AppliedRecord>) -> Result<(), ApplyError> {
        let mut image = self.image.lock();
        for record in records {
            if let Some((last, _)) = image.last() {
                assert!(record.offset > *last, "applied out of order");
            }
            let mut open = self.in_transaction.lock();
            *open = open_after(*open, &record.value);
            image.push((record.offset, record.value));
        }
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError> {
        if *self.in_transaction.lock() {
            return Ok(None);
        }
        Ok(Some(
            self.image
                .lock()
                .iter()
                .map(|(o, v)| encode(*o, v))
                .collect(),
        ))
    }

    fn load_snapshot(&self, _end_offset: i64, records: Vec<Bytes>) -> Result<(), ApplyError> {
        let image: Vec<(i64, Bytes)> = records
            .into_iter()
            .map(|r| {
                let offset = i64::from_be_bytes(r[..8].try_into().unwrap());
                (offset, r.slice(8..))
            })
            .collect();
        let open = image.iter().fold(false, |open, (_, v)| open_after(open, v));
        assert!(!open, "a snapshot taken inside a metadata transaction");
        *self.image.lock() = image;
        *self.in_transaction.lock() = false;
        Ok(())
    }
}

/// Where a node's log lives: memory, or the metadata log on disk (a crash reopens it).
enum Storage {
    Memory(Arc<Mutex<MemLogBackend>>),
    Kafka,
}

struct Node {
    storage: Storage,
    dir: tempfile::TempDir,
    applier: Arc<TestApplier>,
    raft: Option<Raft>,
}

/// The network: who is up, and the dice for delays and drops.
struct Router {
    up: Mutex<BTreeMap<NodeId, Raft>>,
    rng: Mutex<Rng>,
    drop_percent: Mutex<u64>,
    /// (term, leader) pairs every node saw itself lead.
    leaders: Mutex<BTreeMap<u64, BTreeSet<NodeId>>>,
    /// Snapshots installed from a leader.
    installs: Mutex<usize>,
}

impl Router {
    /// A random delay, then the target if it is up and the message is not dropped.
    async fn deliver(&self) -> Option<()> {
        let (delay, dropped) = {
            let mut rng = self.rng.lock();
            let drop_percent = *self.drop_percent.lock();
            (rng.below(60), rng.chance(drop_percent))
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        (!dropped).then_some(())
    }

    fn target(&self, id: NodeId) -> Option<Raft> {
        self.up.lock().get(&id).cloned()
    }
}

fn unreachable(why: &str) -> RPCError<KRaft> {
    RPCError::Unreachable(Unreachable::new(&AnyError::error(why)))
}

fn unreachable_stream(why: &str) -> StreamingError<KRaft> {
    StreamingError::Unreachable(Unreachable::new(&AnyError::error(why)))
}

#[derive(Clone)]
struct Net {
    router: Arc<Router>,
}

struct Client {
    router: Arc<Router>,
    target: NodeId,
}

impl RaftNetworkFactory<KRaft> for Net {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, _node: &openraft::BasicNode) -> Client {
        Client {
            router: Arc::clone(&self.router),
            target,
        }
    }
}

impl Client {
    async fn raft(&self) -> Option<Raft> {
        self.router.deliver().await?;
        self.router.target(self.target)
    }
}

impl RaftNetworkV2<KRaft> for Client {
    type SnapshotData = Bytes;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KRaft>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<KRaft>, RPCError<KRaft>> {
        let raft = self.raft().await.ok_or_else(|| unreachable("down"))?;
        let response = raft
            .append_entries(rpc)
            .await
            .map_err(|_| unreachable("failed"))?;
        self.router
            .deliver()
            .await
            .ok_or_else(|| unreachable("reply lost"))?;
        Ok(response)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<KRaft>, RPCError<KRaft>> {
        let raft = self.raft().await.ok_or_else(|| unreachable("down"))?;
        let response = raft.vote(rpc).await.map_err(|_| unreachable("failed"))?;
        self.router
            .deliver()
            .await
            .ok_or_else(|| unreachable("reply lost"))?;
        Ok(response)
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<KRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<KRaft>, RPCError<KRaft>> {
        let raft = self.raft().await.ok_or_else(|| unreachable("down"))?;
        let response = raft
            .pre_vote(rpc)
            .await
            .map_err(|_| unreachable("failed"))?;
        self.router
            .deliver()
            .await
            .ok_or_else(|| unreachable("reply lost"))?;
        Ok(response)
    }

    async fn full_snapshot(
        &mut self,
        vote: krust_raft::Vote,
        snapshot: openraft::type_config::alias::SnapshotOf<KRaft, Bytes>,
        _cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<KRaft>, StreamingError<KRaft>> {
        let raft = self
            .raft()
            .await
            .ok_or_else(|| unreachable_stream("down"))?;
        let response = raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|_| unreachable_stream("failed"))?;
        *self.router.installs.lock() += 1;
        Ok(response)
    }
}

fn voters(n: i32) -> StaticVoters {
    StaticVoters::new(
        (1..=n)
            .map(|id| Voter {
                id,
                host: "sim".into(),
                port: 9000 + id as u16,
            })
            .collect(),
    )
    .unwrap()
}

async fn start(router: &Arc<Router>, voters: &StaticVoters, id: NodeId, node: &mut Node) {
    node.applier = Arc::new(TestApplier::default());
    let raft = match &node.storage {
        Storage::Memory(backend) => {
            let store = LogStore::open(Arc::clone(backend), voters.clone()).unwrap();
            let dir = node.dir.path().to_path_buf();
            launch(router, voters, id, store, dir, &node.applier).await
        }
        Storage::Kafka => {
            let dir = node.dir.path().join("__cluster_metadata-0");
            let log = Log::open(
                &dir,
                TopicPartition::new("__cluster_metadata", 0),
                None,
                LogConfig::default(),
                LoadParams::default(),
                0,
            )
            .unwrap();
            let backend = KafkaLogBackend::new(Arc::new(Mutex::new(log)));
            let store = LogStore::open(Arc::new(Mutex::new(backend)), voters.clone()).unwrap();
            launch(router, voters, id, store, dir, &node.applier).await
        }
    };
    watch_leaders(router, &raft);
    router.up.lock().insert(id, raft.clone());
    node.raft = Some(raft);
}

async fn launch<B: LogBackend>(
    router: &Arc<Router>,
    voters: &StaticVoters,
    id: NodeId,
    store: LogStore<B>,
    snapshot_dir: std::path::PathBuf,
    applier: &Arc<TestApplier>,
) -> Raft {
    let sm = StateMachine::open(snapshot_dir, applier.clone(), voters.clone(), None).unwrap();
    let mut settings = QuorumSettings::new(id, voters.clone());
    settings.election_timeout_ms = 300;
    settings.heartbeat_ms = 75;
    let net = Net {
        router: Arc::clone(router),
    };
    quorum::start(&settings, store, sm, net).await.unwrap()
}

/// Records every (term, leader) a node reports being.
fn watch_leaders(router: &Arc<Router>, raft: &Raft) {
    let router = Arc::clone(router);
    let mut metrics = raft.metrics();
    tokio::spawn(async move {
        loop {
            {
                let m = metrics.borrow_watched();
                if m.state == ServerState::Leader {
                    router
                        .leaders
                        .lock()
                        .entry(m.current_term)
                        .or_default()
                        .insert(m.id);
                }
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
}

async fn crash(router: &Router, id: NodeId, node: &mut Node) {
    router.up.lock().remove(&id);
    if let Some(raft) = node.raft.take() {
        raft.shutdown().await.unwrap();
    }
    if let Storage::Memory(backend) = &node.storage {
        backend.lock().crash();
    }
}

fn images(nodes: &BTreeMap<NodeId, Node>) -> Vec<Vec<(i64, Bytes)>> {
    nodes
        .values()
        .map(|n| n.applier.image.lock().clone())
        .collect()
}

fn check_prefixes(nodes: &BTreeMap<NodeId, Node>) {
    let images = images(nodes);
    for a in &images {
        for b in &images {
            let n = a.len().min(b.len());
            assert_eq!(a[..n], b[..n], "applied sequences diverge");
        }
    }
}

/// Runs one seed; how many snapshots were installed from a leader.
async fn simulate(seed: u64, n: i32, on_disk: bool) -> usize {
    let voters = voters(n);
    let router = Arc::new(Router {
        up: Mutex::new(BTreeMap::new()),
        rng: Mutex::new(Rng(seed)),
        drop_percent: Mutex::new(10),
        leaders: Mutex::new(BTreeMap::new()),
        installs: Mutex::new(0),
    });
    let mut nodes = BTreeMap::new();
    for id in 1..=n {
        let mut node = Node {
            storage: if on_disk {
                Storage::Kafka
            } else {
                Storage::Memory(Arc::new(Mutex::new(MemLogBackend::default())))
            },
            dir: tempfile::tempdir().unwrap(),
            applier: Arc::new(TestApplier::default()),
            raft: None,
        };
        start(&router, &voters, id, &mut node).await;
        nodes.insert(id, node);
    }
    let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
    let mut acknowledged: BTreeMap<i64, Bytes> = BTreeMap::new();
    let max_down = (n as usize - 1) / 2;
    for step in 0..120u64 {
        match rng.below(12) {
            0 | 1 => {
                let down = nodes.values().filter(|n| n.raft.is_none()).count();
                let mut id = rng.below(n as u64) as i32 + 1;
                if rng.chance(50) {
                    // The leader, if there is one: failover is what matters most.
                    let leader = nodes
                        .values()
                        .filter_map(|n| n.raft.as_ref())
                        .map(quorum::status)
                        .find(|s| s.is_leader);
                    id = leader.map_or(id, |s| s.node_id);
                }
                if down < max_down && nodes[&id].raft.is_some() {
                    crash(&router, id, nodes.get_mut(&id).unwrap()).await;
                }
            }
            2 | 3 => {
                let id = rng.below(n as u64) as i32 + 1;
                if nodes[&id].raft.is_none() {
                    start(&router, &voters, id, nodes.get_mut(&id).unwrap()).await;
                }
            }
            4 => {
                let id = rng.below(n as u64) as i32 + 1;
                if let Some(raft) = &nodes[&id].raft {
                    raft.trigger().snapshot().await.unwrap();
                }
            }
            _ => {
                let id = rng.below(n as u64) as i32 + 1;
                if let Some(raft) = nodes[&id].raft.clone() {
                    let values = proposal_values(seed, step, 1 + rng.below(3));
                    let proposal = quorum::propose(&raft, values.clone());
                    match tokio::time::timeout(Duration::from_secs(5), proposal).await {
                        Ok(Ok(last)) => {
                            let first = last + 1 - values.len() as i64;
                            for (i, value) in values.into_iter().enumerate() {
                                acknowledged.insert(first + i as i64, value);
                            }
                        }
                        Ok(Err(QuorumError::NotLeader { .. } | QuorumError::Discarded { .. }))
                        | Err(_) => {}
                        Ok(Err(other)) => panic!("proposal failed: {other}"),
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
        check_prefixes(&nodes);
    }

    // Heal: everyone up, no drops; a last proposal commits everything before it.
    *router.drop_percent.lock() = 0;
    for id in 1..=n {
        if nodes[&id].raft.is_none() {
            start(&router, &voters, id, nodes.get_mut(&id).unwrap()).await;
        }
    }
    let mut last = None;
    for _ in 0..100 {
        let leader = nodes
            .values()
            .filter_map(|n| n.raft.clone())
            .find(|r| quorum::status(r).is_leader);
        if let Some(raft) = leader {
            if let Ok(Ok(offset)) = tokio::time::timeout(
                Duration::from_secs(5),
                quorum::propose(&raft, vec![Bytes::from("final")]),
            )
            .await
            {
                acknowledged.insert(offset, Bytes::from("final"));
                last = Some(offset);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let last = last.expect("the healed quorum commits");
    for node in nodes.values() {
        let raft = node.raft.clone().unwrap();
        let mut metrics = raft.metrics();
        let applied = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if metrics
                    .borrow_watched()
                    .last_applied
                    .is_some_and(|l| l.index as i64 >= last)
                {
                    return;
                }
                metrics.changed().await.unwrap();
            }
        })
        .await;
        assert!(
            applied.is_ok(),
            "node {} did not apply {last}",
            raft.metrics().borrow_watched().id
        );
    }
    check_prefixes(&nodes);
    for image in images(&nodes) {
        let got: BTreeMap<i64, Bytes> = image.into_iter().collect();
        for (offset, value) in &acknowledged {
            assert_eq!(
                got.get(offset),
                Some(value),
                "acknowledged offset {offset} lost or changed"
            );
        }
    }
    for (term, leaders) in router.leaders.lock().iter() {
        assert_eq!(leaders.len(), 1, "term {term} had leaders {leaders:?}");
    }
    assert!(
        acknowledged.len() > 10,
        "the simulation committed too little to check"
    );
    let terms = router.leaders.lock().len();
    assert!(terms > 1, "no leader ever changed");
    eprintln!(
        "seed {seed}: {} records acknowledged over {terms} terms, {} snapshots installed",
        acknowledged.len(),
        router.installs.lock()
    );
    for node in nodes.values_mut() {
        if let Some(raft) = node.raft.take() {
            raft.shutdown().await.unwrap();
        }
    }
    let installs = *router.installs.lock();
    installs
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn three_voters_keep_every_acknowledged_record_through_crashes_and_lost_messages() {
    let mut installs = 0;
    for seed in [1, 2, 3] {
        installs += simulate(seed, 3, false).await;
    }
    assert!(
        installs > 0,
        "no follower ever needed a snapshot from its leader"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn five_voters_keep_every_acknowledged_record_through_crashes_and_lost_messages() {
    let mut installs = 0;
    for seed in [11, 12] {
        installs += simulate(seed, 5, false).await;
    }
    assert!(
        installs > 0,
        "no follower ever needed a snapshot from its leader"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn three_voters_on_kafka_format_metadata_logs_keep_every_acknowledged_record() {
    let mut installs = 0;
    for seed in [21, 22] {
        installs += simulate(seed, 3, true).await;
    }
    assert!(
        installs > 0,
        "no follower ever needed a snapshot from its leader"
    );
}
