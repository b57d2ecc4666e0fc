//! Three voters over real TCP on 127.0.0.1, each on a Kafka-format metadata log: they elect a
//! leader, commit proposals, and elect another once the leader is stopped.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use krust_raft::network::{parse_request, read_frame, response_frame, serve, TcpNetwork};
use krust_raft::openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use krust_raft::openraft::raft::VoteRequest;
use krust_raft::openraft::BasicNode;
use krust_raft::quorum::{self, QuorumError, QuorumSettings};
use krust_raft::state_machine::{AppliedRecord, Applier, ApplyError};
use krust_raft::{
    KafkaLogBackend, LogStore, NodeId, Raft, StateMachine, StaticVoters, Vote, Voter,
};
use krust_storage::{LoadParams, Log, LogConfig, TopicPartition};
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Records(Mutex<Vec<(i64, Bytes)>>);

impl Applier for Records {
    fn apply(&self, records: Vec<AppliedRecord>) -> Result<(), ApplyError> {
        let mut applied = self.0.lock();
        applied.extend(records.into_iter().map(|r| (r.offset, r.value)));
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError> {
        Ok(Some(self.0.lock().iter().map(|(_, v)| v.clone()).collect()))
    }

    fn load_snapshot(&self, _end_offset: i64, _records: Vec<Bytes>) -> Result<(), ApplyError> {
        Err(ApplyError("this test takes no snapshot".into()))
    }
}

struct Node {
    raft: Raft,
    applied: Arc<Records>,
    server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// Serves quorum requests on `listener` with the node's Raft once it is set.
fn serve_on(
    listener: TcpListener,
    raft: Arc<OnceLock<Raft>>,
    voters: StaticVoters,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let (raft, voters) = (Arc::clone(&raft), voters.clone());
            connections.spawn(async move {
                while let Ok(frame) = read_frame(&mut stream).await {
                    let Ok((api_key, version, correlation_id, body)) = parse_request(frame) else {
                        return;
                    };
                    let Some(raft) = raft.get() else { return };
                    let Ok(response) = serve(raft, &voters, api_key, version, body).await else {
                        return;
                    };
                    let frame = response_frame(correlation_id, &response);
                    if stream.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            });
        }
    })
}

async fn start_node(id: NodeId, voters: &StaticVoters, listener: TcpListener) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("__cluster_metadata-0");
    let log = Log::open(
        &log_dir,
        TopicPartition::new("__cluster_metadata", 0),
        None,
        LogConfig::default(),
        LoadParams::default(),
        0,
    )
    .unwrap();
    let backend = Arc::new(Mutex::new(KafkaLogBackend::new(Arc::new(Mutex::new(log)))));
    let store = LogStore::open(backend, voters.clone()).unwrap();
    let applied = Arc::new(Records::default());
    let sm = StateMachine::open(log_dir, applied.clone(), voters.clone(), None).unwrap();
    let cell = Arc::new(OnceLock::new());
    let server = serve_on(listener, Arc::clone(&cell), voters.clone());
    let settings = QuorumSettings::new(id, voters.clone());
    let network = TcpNetwork::new(id, voters.clone());
    let raft = quorum::start(&settings, store, sm, network).await.unwrap();
    cell.set(raft.clone()).ok().unwrap();
    Node {
        raft,
        applied,
        server,
        _dir: dir,
    }
}

async fn leader_of(nodes: &[&Node]) -> Raft {
    for _ in 0..300 {
        if let Some(node) = nodes.iter().find(|n| quorum::status(&n.raft).is_leader) {
            return node.raft.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no leader elected");
}

/// Listeners on free ports of 127.0.0.1 for voters 1..=count, and those voters.
async fn bind_voters(count: i32) -> (Vec<TcpListener>, Vec<Voter>) {
    let mut listeners = Vec::new();
    let mut listed = Vec::new();
    for id in 1..=count {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        listed.push(Voter {
            id,
            host: "127.0.0.1".into(),
            port,
        });
        listeners.push(listener);
    }
    (listeners, listed)
}

/// Proposes through whoever leads now, again when leadership moved meanwhile (a loaded machine
/// can miss a heartbeat right after an election), as a client retries NOT_CONTROLLER; the
/// leader that committed and the offset.
async fn propose_to_leader(nodes: &[&Node], values: &[&str]) -> (Raft, i64) {
    let records: Vec<Bytes> = values.iter().map(|v| Bytes::from(v.to_string())).collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leader = leader_of(nodes).await;
        match quorum::propose(&leader, records.clone()).await {
            Ok(offset) => return (leader, offset),
            Err(QuorumError::NotLeader { .. } | QuorumError::Discarded { .. })
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("proposal failed: {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_over_tcp_commit_and_fail_over() {
    let (listeners, listed) = bind_voters(3).await;
    let voters = StaticVoters::new(listed).unwrap();
    let mut nodes = Vec::new();
    for (id, listener) in (1..=3).zip(listeners) {
        nodes.push(start_node(id, &voters, listener).await);
    }

    let (leader, last) =
        propose_to_leader(&nodes.iter().collect::<Vec<_>>(), &["a", "b", "c"]).await;
    let follower = nodes
        .iter()
        .find(|n| !quorum::status(&n.raft).is_leader)
        .unwrap();
    match quorum::propose(&follower.raft, vec![Bytes::from("x")]).await {
        Err(QuorumError::NotLeader { leader_id }) => {
            assert_eq!(leader_id, Some(quorum::status(&leader).node_id))
        }
        other => panic!("a follower accepted a proposal: {other:?}"),
    }
    for node in &nodes {
        let caught_up = quorum::wait_for(&node.raft, WAIT, |s| s.high_watermark > last).await;
        assert!(caught_up, "a voter never learned the commit");
    }
    // The leader learns each follower's log end from its replication acks.
    let replicated = |s: &quorum::QuorumStatus| {
        s.voters.len() == 3 && s.voters.iter().all(|v| v.log_end_offset > last)
    };
    assert!(quorum::wait_for(&leader, WAIT, replicated).await);

    // Hand leadership to a follower (openraft's TransferLeader RPC), then stop that leader:
    // the other two elect one of themselves in a later epoch.
    let target = quorum::status(&follower.raft).node_id;
    leader.trigger().transfer_leader(target).await.unwrap();
    assert!(quorum::wait_for(&follower.raft, WAIT, |s| s.is_leader).await);
    let leader = follower.raft.clone();
    let old = quorum::status(&leader);
    let index = nodes
        .iter()
        .position(|n| quorum::status(&n.raft).node_id == old.node_id);
    let stopped = nodes.remove(index.unwrap());
    stopped.server.abort();
    stopped.raft.shutdown().await.unwrap();
    let (new_leader, after) = propose_to_leader(&nodes.iter().collect::<Vec<_>>(), &["d"]).await;
    let new = quorum::status(&new_leader);
    assert_ne!(new.node_id, old.node_id);
    assert!(new.leader_epoch > old.leader_epoch);
    assert!(after > last);
    for node in &nodes {
        assert!(quorum::wait_for(&node.raft, WAIT, |s| s.high_watermark > after).await);
        let applied: Vec<Bytes> = node
            .applied
            .0
            .lock()
            .iter()
            .map(|(_, v)| v.clone())
            .collect();
        let mut expected: Vec<Bytes> = ["a", "b", "c"].iter().map(|v| Bytes::from(*v)).collect();
        expected.push(Bytes::from("d"));
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut applied = applied;
        while applied != expected && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            applied = node
                .applied
                .0
                .lock()
                .iter()
                .map(|(_, v)| v.clone())
                .collect();
        }
        assert_eq!(applied, expected);
    }
    for node in nodes {
        node.server.abort();
        node.raft.shutdown().await.unwrap();
    }
}

/// A node started with another controller.quorum.voters (here a fourth voter) asks for votes
/// in a far later term: the voters refuse it with INCONSISTENT_VOTER_SET before their Raft
/// sees it, so the leader keeps leading in its epoch. The same request from a sender with
/// the right voters reaches Raft and gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_other_voters_is_refused_and_does_not_disturb_the_quorum() {
    let (listeners, listed) = bind_voters(4).await;
    let other_voters = StaticVoters::new(listed.clone()).unwrap();
    let voters = StaticVoters::new(listed[..3].to_vec()).unwrap();
    let mut nodes = Vec::new();
    for (id, listener) in (1..=3).zip(listeners) {
        nodes.push(start_node(id, &voters, listener).await);
    }
    let leader = quorum::status(&leader_of(&nodes.iter().collect::<Vec<_>>()).await);
    let target = listed
        .iter()
        .find(|v| v.id == leader.node_id)
        .unwrap()
        .clone();
    let node = BasicNode {
        addr: target.address(),
    };
    let option = RPCOption::new(Duration::from_secs(5));
    let term = leader.leader_epoch as u64 + 10;
    let request = || VoteRequest::new(Vote::new(term, 4), None);

    let mut stranger = TcpNetwork::new(4, other_voters)
        .new_client(target.id, &node)
        .await;
    let refused = stranger
        .vote(request(), option.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("INCONSISTENT_VOTER_SET"), "{refused}");
    let after = quorum::status(&leader_of(&nodes.iter().collect::<Vec<_>>()).await);
    assert_eq!(
        (after.node_id, after.leader_epoch),
        (leader.node_id, leader.leader_epoch)
    );

    let mut peer = TcpNetwork::new(3, voters.clone())
        .new_client(target.id, &node)
        .await;
    let answered = peer.vote(request(), option).await.unwrap();
    assert!(
        !answered.vote_granted,
        "the leader's log is ahead of the candidate's"
    );
    for node in nodes {
        node.server.abort();
        node.raft.shutdown().await.unwrap();
    }
}
