//! Starting a node of the quorum, proposing records, and its status (DescribeQuorum's view).

use std::sync::Arc;
use std::time::Duration;

use openraft::Instant as _;

use futures_util::StreamExt;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::entry::RaftEntry;
use openraft::errors::ClientWriteError;
use openraft::network::NetSnapshot;
use openraft::{RaftNetworkFactory, SnapshotPolicy};

use crate::log_backend::LogBackend;
use crate::log_store::LogStore;
use crate::state_machine::StateMachine;
use crate::voters::{StaticVoters, VotersError};
use crate::{Entry, KRaft, MetadataRecord, NodeId, Raft};

/// Kafka's `controller.quorum.election.timeout.ms` default. openraft draws each election
/// timeout from [timeout, 2 x timeout), as Kafka randomises its own.
pub const ELECTION_TIMEOUT_MS: u64 = 1000;
/// The leader's heartbeat, standing in for the followers' fetches (Kafka's followers fetch
/// every few hundred ms; `controller.quorum.fetch.timeout.ms` is 2000 ms).
pub const HEARTBEAT_MS: u64 = 250;

#[derive(Clone, Debug)]
pub struct QuorumSettings {
    /// This node's `node.id`.
    pub node_id: NodeId,
    pub voters: StaticVoters,
    pub election_timeout_ms: u64,
    pub heartbeat_ms: u64,
}

impl QuorumSettings {
    pub fn new(node_id: NodeId, voters: StaticVoters) -> Self {
        Self {
            node_id,
            voters,
            election_timeout_ms: ELECTION_TIMEOUT_MS,
            heartbeat_ms: HEARTBEAT_MS,
        }
    }

    fn raft_config(&self) -> Result<Arc<openraft::Config>, QuorumError> {
        let config = openraft::Config {
            cluster_name: "krust-metadata".into(),
            election_timeout_min: self.election_timeout_ms,
            election_timeout_max: self.election_timeout_ms * 2,
            // A short election timeout brings the heartbeat down with it.
            heartbeat_interval: self.heartbeat_ms.min(self.election_timeout_ms / 4).max(1),
            enable_pre_vote: Some(true),
            // The controller decides when to snapshot (`trigger_snapshot`).
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: 0,
            ..Default::default()
        };
        Ok(Arc::new(
            config
                .validate()
                .map_err(|e| QuorumError::Raft(e.to_string()))?,
        ))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Voters(#[from] VotersError),
    #[error("metadata log: {0}")]
    Io(#[from] std::io::Error),
    #[error("the metadata log was written by a single-node krust; it can only go on with controller.quorum.voters naming this node alone (node {node_id}), not {voters}")]
    LegacyLogNeedsSingleVoter { node_id: NodeId, voters: String },
    #[error("raft: {0}")]
    Raft(String),
    #[error("this node is not the active controller; the leader is {leader_id:?}")]
    NotLeader { leader_id: Option<NodeId> },
    #[error("the proposal's entries were dropped on a leader change; they may or may not commit (leader {leader_id:?})")]
    Discarded { leader_id: Option<NodeId> },
}

/// Makes a metadata log written by single-node krust (records, no membership entry, no
/// vote) a Raft log of its one voter: the membership entry goes after its last record, in the
/// same epoch, so no record moves or is lost.
pub async fn adopt_legacy_log<B: LogBackend>(
    store: &LogStore<B>,
    settings: &QuorumSettings,
) -> Result<(), QuorumError> {
    let vote = store.backend().lock().read_vote()?;
    let Some(last) = store.last_entry().await? else {
        return Ok(());
    };
    if vote.is_some() {
        return Ok(());
    }
    let tail = store.read_entries(last.index, last.index + 1).await?;
    if tail.iter().any(|e| e.get_membership().is_some()) {
        return Ok(());
    }
    let voters = &settings.voters;
    if voters.ids().into_iter().collect::<Vec<_>>() != vec![settings.node_id] {
        return Err(QuorumError::LegacyLogNeedsSingleVoter {
            node_id: settings.node_id,
            voters: voters.to_string(),
        });
    }
    let entry = Entry::new_membership(
        crate::LogId::new_term_index(last.leader_id.term, last.index + 1),
        voters.membership(),
    );
    store.append_entries(vec![entry]).await?;
    tracing::info!(
        offset = last.index + 1,
        "the metadata log now names its voter"
    );
    Ok(())
}

/// Starts this node's Raft. A new log gets the voters as its first entry; a log naming other
/// voters is refused. A single voter elects itself at once.
pub async fn start<B, N>(
    settings: &QuorumSettings,
    store: LogStore<B>,
    state_machine: StateMachine,
    network: N,
) -> Result<Raft, QuorumError>
where
    B: LogBackend,
    N: RaftNetworkFactory<KRaft>,
    N::Network: NetSnapshot<KRaft, SnapshotData = bytes::Bytes>,
{
    adopt_legacy_log(&store, settings).await?;
    let fresh = store.last_entry().await?.is_none() && state_machine.last_applied().await.is_none();
    let raft = Raft::new(
        settings.node_id,
        settings.raft_config()?,
        network,
        store,
        state_machine,
    )
    .await
    .map_err(|e| QuorumError::Raft(e.to_string()))?;
    if fresh {
        raft.initialize(settings.voters.nodes())
            .await
            .map_err(|e| QuorumError::Raft(e.to_string()))?;
    } else {
        let membership = raft
            .with_raft_state(|state| state.membership_state.effective().membership().clone())
            .await
            .map_err(|e| QuorumError::Raft(e.to_string()))?;
        let stored = StaticVoters::from_membership(&membership)?;
        if let Err(error) = settings.voters.check_same(&stored) {
            let _ = raft.shutdown().await;
            return Err(error.into());
        }
        if settings.voters.voters().len() == 1 {
            raft.trigger()
                .elect(false)
                .await
                .map_err(|e| QuorumError::Raft(e.to_string()))?;
        }
    }
    if settings.voters.voters().len() == 1 {
        // Alone, this node leads at once: start-up returns with it leading, as a single-node
        // controller did before the quorum.
        let bound = Duration::from_millis(settings.election_timeout_ms * 10);
        if !wait_for(&raft, bound, |status| status.is_leader).await {
            return Err(QuorumError::Raft(
                "the single voter did not become leader".into(),
            ));
        }
    }
    Ok(raft)
}

/// Appends `records` as consecutive entries on the leader and waits until they are
/// committed and applied; the offset of the last.
pub async fn propose(raft: &Raft, records: Vec<bytes::Bytes>) -> Result<i64, QuorumError> {
    let count = records.len();
    let mut results = raft
        .client_write_many(records.into_iter().map(MetadataRecord))
        .await
        .map_err(|e| QuorumError::Raft(e.to_string()))?;
    let mut last = None;
    for _ in 0..count {
        let Some(result) = results.next().await else {
            break;
        };
        match result.map_err(|e| QuorumError::Raft(e.to_string()))? {
            Ok(response) => last = Some(response.log_id.index),
            Err(ClientWriteError::ForwardToLeader(forward)) => {
                return Err(QuorumError::NotLeader {
                    leader_id: forward.leader_id,
                })
            }
            Err(ClientWriteError::LogEntryDiscarded(forward)) => {
                return Err(QuorumError::Discarded {
                    leader_id: forward.leader_id,
                })
            }
            Err(other) => return Err(QuorumError::Raft(other.to_string())),
        }
    }
    let last = last.ok_or_else(|| QuorumError::Raft("no proposal result".into()))?;
    i64::try_from(last).map_err(|e| QuorumError::Raft(e.to_string()))
}

/// A voter as DescribeQuorum shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub replica_id: NodeId,
    /// -1 when unknown.
    pub log_end_offset: i64,
    /// Wall-clock ms of the last heartbeat acknowledged, -1 when none.
    pub last_fetch_timestamp: i64,
    /// The same once the voter holds the whole log, else -1.
    pub last_caught_up_timestamp: i64,
}

/// DescribeQuorum's view of the quorum, as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: NodeId,
    /// -1 when unknown.
    pub leader_id: NodeId,
    pub leader_epoch: i32,
    /// Offsets below it are committed.
    pub high_watermark: i64,
    pub is_leader: bool,
    pub voters: Vec<ReplicaStatus>,
    pub observers: Vec<ReplicaStatus>,
}

pub fn status(raft: &Raft) -> QuorumStatus {
    let metrics = raft.metrics().borrow_watched().clone();
    let next = |index: Option<u64>| index.map_or(0, |i| i as i64 + 1);
    let leader_id = metrics.current_leader.unwrap_or(-1);
    let is_leader = leader_id == metrics.id;
    let log_end = next(metrics.last_log_index);
    let (now_instant, now_ms) = (openraft::TokioInstant::now(), crate::wall_clock_ms());
    let wall = |at: openraft::TokioInstant| now_ms - (now_instant - at).as_millis() as i64;
    let voters = metrics
        .membership_config
        .membership()
        .voter_ids()
        .map(|id| {
            if id == metrics.id {
                return ReplicaStatus {
                    replica_id: id,
                    log_end_offset: log_end,
                    last_fetch_timestamp: now_ms,
                    last_caught_up_timestamp: now_ms,
                };
            }
            let matched = metrics
                .replication
                .as_ref()
                .and_then(|r| r.get(&id).copied().flatten())
                .map(|log_id| log_id.index);
            let fetched = metrics
                .heartbeat
                .as_ref()
                .and_then(|h| h.get(&id).copied().flatten())
                .map(|at| wall(*at));
            let end = matched.map_or(-1, |i| i as i64 + 1);
            ReplicaStatus {
                replica_id: id,
                log_end_offset: if is_leader { end } else { -1 },
                last_fetch_timestamp: fetched.unwrap_or(-1),
                last_caught_up_timestamp: if end == log_end {
                    fetched.unwrap_or(-1)
                } else {
                    -1
                },
            }
        })
        .collect();
    QuorumStatus {
        node_id: metrics.id,
        leader_id,
        leader_epoch: i32::try_from(metrics.current_term).unwrap_or(i32::MAX),
        high_watermark: next(metrics.local_committed.map(|c| c.index)),
        is_leader,
        voters,
        observers: Vec::new(),
    }
}

/// (leader id or -1, term) each time either changes, starting with the current ones.
pub fn leader_changes(raft: &Raft) -> impl futures_util::Stream<Item = (NodeId, i32)> {
    let metrics = raft.metrics();
    futures_util::stream::unfold((metrics, None), |(mut metrics, last)| async move {
        loop {
            let now = {
                let m = metrics.borrow_watched();
                (
                    m.current_leader.unwrap_or(-1),
                    i32::try_from(m.current_term).unwrap_or(i32::MAX),
                )
            };
            if last != Some(now) {
                return Some((now, (metrics, Some(now))));
            }
            metrics.changed().await.ok()?;
        }
    })
}

/// Waits until `f` holds for the metrics or `timeout` passes; whether it held.
pub async fn wait_for(raft: &Raft, timeout: Duration, f: impl Fn(&QuorumStatus) -> bool) -> bool {
    let mut metrics = raft.metrics();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f(&status(raft)) {
            return true;
        }
        if tokio::time::timeout_at(deadline, metrics.changed())
            .await
            .is_err()
        {
            return f(&status(raft));
        }
    }
}
