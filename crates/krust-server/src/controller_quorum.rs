//! This node's member of the controller quorum (krust-raft) over `__cluster_metadata-0`:
//! started once the controller can apply records, it commits proposals through Raft, answers
//! the quorum's RPCs arriving on a controller listener, and DescribeQuorum's view.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use krust_raft::network::TcpNetwork;
use krust_raft::quorum::{self, QuorumError, QuorumSettings as RaftSettings, QuorumStatus};
use krust_raft::state_machine::{Applier, SnapshotListener};
use krust_raft::{KafkaLogBackend, LogStore, Raft, StateMachine, StaticVoters, Voter};
use krust_storage::kraft_snapshot::SnapshotId;
use parking_lot::Mutex;

use crate::clock::now_ms;
use crate::replica_manager::ReplicaManager;
use crate::settings::BrokerSettings;

/// The quorum member, once started (`Broker::start_quorum`).
pub type QuorumCell = Arc<OnceLock<ControllerQuorum>>;

pub struct ControllerQuorum {
    raft: Raft,
    voters: StaticVoters,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error("the controller quorum is already started")]
    AlreadyStarted,
    #[error("this node is not in controller.quorum.voters (process.roles has no controller); observers are not supported yet")]
    NotAVoter,
    #[error("{0}")]
    MetadataLog(String),
}

/// The voters the settings name; none named: this node alone on its first listener.
pub fn configured_voters(settings: &BrokerSettings) -> Result<StaticVoters, QuorumError> {
    let listed: Vec<Voter> = if settings.quorum.voters.is_empty() {
        let first = settings.listeners.first();
        vec![Voter {
            id: settings.node_id,
            host: first.map_or("localhost".into(), |l| l.host.clone()),
            port: first.map_or(9093, |l| l.port),
        }]
    } else {
        settings
            .quorum
            .voters
            .iter()
            .map(|(id, host, port)| Voter {
                id: *id,
                host: host.clone(),
                port: *port,
            })
            .collect()
    };
    Ok(StaticVoters::new(listed)?)
}

/// Runs the metadata log's retention after each snapshot (docs/metadata-log.md).
struct Retention(Arc<ReplicaManager>);

impl SnapshotListener for Retention {
    fn snapshot_written(&self, id: SnapshotId) {
        if let Err(error) = self.0.metadata_snapshot_written(id, now_ms()) {
            tracing::warn!(%error, snapshot = %id.file_name(), "metadata log retention after a snapshot failed");
        }
    }
}

impl ControllerQuorum {
    /// Opens the metadata log as the Raft log, loads the newest snapshot into `applier` and
    /// joins the quorum.
    pub async fn start(
        settings: &BrokerSettings,
        replicas: &Arc<ReplicaManager>,
        applier: Arc<dyn Applier>,
    ) -> Result<Self, StartError> {
        let voters = configured_voters(settings)?;
        if !settings.quorum.is_voter || voters.get(settings.node_id).is_none() {
            return Err(StartError::NotAVoter);
        }
        let log = replicas
            .metadata_log()
            .map_err(|e| StartError::MetadataLog(e.to_string()))?;
        let dir = log.lock().dir().to_path_buf();
        let backend = Arc::new(Mutex::new(KafkaLogBackend::new(log)));
        let store = LogStore::open(backend, voters.clone()).map_err(QuorumError::from)?;
        let retention: Arc<dyn SnapshotListener> = Arc::new(Retention(Arc::clone(replicas)));
        let sm = StateMachine::open(dir, applier, voters.clone(), Some(retention))
            .map_err(QuorumError::from)?;
        let mut raft_settings = RaftSettings::new(settings.node_id, voters.clone());
        raft_settings.election_timeout_ms = settings.quorum.election_timeout_ms;
        let network = TcpNetwork::new(settings.node_id, voters.clone());
        let raft = quorum::start(&raft_settings, store, sm, network).await?;
        Ok(ControllerQuorum { raft, voters })
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    pub fn voters(&self) -> &StaticVoters {
        &self.voters
    }

    /// Appends `records` as consecutive entries once this node leads; the last one's offset
    /// once committed.
    pub async fn propose(&self, records: Vec<Bytes>) -> Result<i64, QuorumError> {
        quorum::propose(&self.raft, records).await
    }

    pub fn status(&self) -> QuorumStatus {
        quorum::status(&self.raft)
    }

    /// Asks for a snapshot of the applied image (written in the background).
    pub async fn trigger_snapshot(&self) -> Result<(), QuorumError> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| QuorumError::Raft(e.to_string()))
    }

    pub async fn shutdown(&self) {
        if let Err(error) = self.raft.shutdown().await {
            tracing::warn!(%error, "the controller quorum did not stop cleanly");
        }
    }
}
