//! This node's member of the controller quorum (krust-raft) over `__cluster_metadata-0`:
//! started once the controller can apply records. A voter commits proposals through Raft and
//! answers the quorum's RPCs arriving on a controller listener, observers' fetches included;
//! an observer (`process.roles=broker`) copies the committed log from the voters. Both give
//! DescribeQuorum's view.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use krust_raft::metadata_fetch::{self, Observers};
use krust_raft::network::{RpcError, TcpNetwork};
use krust_raft::observer::Observer;
use krust_raft::quorum::{self, QuorumError, QuorumSettings as RaftSettings, QuorumStatus};
use krust_raft::state_machine::{Applier, SnapshotListener};
use krust_raft::wire::METADATA_FETCH;
use krust_raft::wire::{self, WireError};
use krust_raft::{KafkaLogBackend, LogStore, NodeId, Raft, StateMachine, StaticVoters, Voter};
use krust_storage::kraft_snapshot::SnapshotId;
use parking_lot::Mutex;

use crate::clock::now_ms;
use crate::replica::replica_manager::ReplicaManager;
use crate::settings::{BrokerSettings, Listener};

/// The quorum member, once started (`Broker::start_quorum`).
pub type QuorumCell = Arc<OnceLock<ControllerQuorum>>;

pub struct ControllerQuorum {
    member: Member,
    voters: StaticVoters,
}

enum Member {
    Voter {
        raft: Raft,
        backend: Arc<Mutex<KafkaLogBackend>>,
        dir: PathBuf,
        observers: Observers,
    },
    Observer(Observer),
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error("the controller quorum is already started")]
    AlreadyStarted,
    #[error("process.roles has controller, so node.id {0} must be in controller.quorum.voters")]
    NotAVoter(NodeId),
    #[error("{0}")]
    MetadataLog(String),
}

/// The listener a quorum of one is reached on: its first controller listener (Kafka's
/// single-node config has `CONTROLLER://:9093`), else its first listener.
pub fn own_quorum_listener(settings: &BrokerSettings) -> Option<&Listener> {
    let names = &settings.quorum.controller_listener_names;
    settings
        .listeners
        .iter()
        .find(|l| names.contains(&l.name))
        .or_else(|| settings.listeners.first())
}

/// The voters the settings name; none named: this node alone on `own_quorum_listener`.
pub fn configured_voters(settings: &BrokerSettings) -> Result<StaticVoters, QuorumError> {
    let listed: Vec<Voter> = if settings.quorum.voters.is_empty() {
        let own = own_quorum_listener(settings);
        vec![Voter {
            id: settings.node_id,
            host: own.map_or("localhost".into(), |l| l.host.clone()),
            port: own.map_or(9093, |l| l.port),
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
    /// Opens the metadata log, loads the newest snapshot into `applier`, and joins the quorum:
    /// as a voter when `process.roles` has `controller`, else as an observer.
    pub async fn start(
        settings: &BrokerSettings,
        replicas: &Arc<ReplicaManager>,
        applier: Arc<dyn Applier>,
    ) -> Result<Self, StartError> {
        let voters = configured_voters(settings)?;
        let log = replicas
            .metadata_log()
            .map_err(|e| StartError::MetadataLog(e.to_string()))?;
        let dir = log.lock().dir().to_path_buf();
        let backend = Arc::new(Mutex::new(KafkaLogBackend::new(log)));
        let retention: Arc<dyn SnapshotListener> = Arc::new(Retention(Arc::clone(replicas)));
        if !settings.quorum.is_voter() {
            let observer = Observer::start(
                settings.node_id,
                voters.clone(),
                backend,
                applier,
                Some(retention),
            )
            .await
            .map_err(QuorumError::from)?;
            return Ok(ControllerQuorum {
                member: Member::Observer(observer),
                voters,
            });
        }
        if voters.get(settings.node_id).is_none() {
            return Err(StartError::NotAVoter(settings.node_id));
        }
        let store =
            LogStore::open(Arc::clone(&backend), voters.clone()).map_err(QuorumError::from)?;
        let sm = StateMachine::open(dir.clone(), applier, voters.clone(), Some(retention))
            .map_err(QuorumError::from)?;
        let raft_settings = RaftSettings::new(settings.node_id, voters.clone());
        let network = TcpNetwork::new(settings.node_id, voters.clone());
        let raft = quorum::start(&raft_settings, store, sm, network).await?;
        Ok(ControllerQuorum {
            member: Member::Voter {
                raft,
                backend,
                dir,
                observers: Observers::default(),
            },
            voters,
        })
    }

    /// The Raft of a voter; `None` on an observer.
    pub fn raft(&self) -> Option<&Raft> {
        match &self.member {
            Member::Voter { raft, .. } => Some(raft),
            Member::Observer(_) => None,
        }
    }

    pub fn voters(&self) -> &StaticVoters {
        &self.voters
    }

    /// Appends `records` as consecutive entries once this node leads; the last one's offset
    /// once committed.
    pub async fn propose(&self, records: Vec<Bytes>) -> Result<i64, QuorumError> {
        match &self.member {
            Member::Voter { raft, .. } => quorum::propose(raft, records).await,
            Member::Observer(observer) => {
                let leader = observer.status().leader_id;
                Err(QuorumError::NotLeader {
                    leader_id: (leader >= 0).then_some(leader),
                })
            }
        }
    }

    pub fn status(&self) -> QuorumStatus {
        match &self.member {
            Member::Voter {
                raft, observers, ..
            } => {
                let mut status = quorum::status(raft);
                if status.is_leader {
                    status.observers = observers.status(status.high_watermark);
                }
                status
            }
            Member::Observer(observer) => observer.status(),
        }
    }

    /// (leader id or -1, epoch) each time either changes, starting with the current ones.
    pub fn leader_changes(&self) -> BoxStream<'static, (NodeId, i32)> {
        match &self.member {
            Member::Voter { raft, .. } => quorum::leader_changes(raft).boxed(),
            Member::Observer(observer) => observer.leader_changes().boxed(),
        }
    }

    /// Answers a quorum RPC (docs/quorum.md): a voter's, or an observer's MetadataFetch.
    pub async fn serve_rpc(
        &self,
        api_key: i16,
        version: i16,
        body: Bytes,
    ) -> Result<Bytes, RpcError> {
        let Member::Voter {
            raft,
            backend,
            dir,
            observers,
        } = &self.member
        else {
            return Err(RpcError::Raft(
                "this node is an observer, not a voter".into(),
            ));
        };
        if api_key != METADATA_FETCH {
            return krust_raft::network::serve(raft, &self.voters, api_key, version, body).await;
        }
        if version != wire::VERSION {
            return Err(WireError::UnsupportedVersion(api_key, version).into());
        }
        let (sent, body) = wire::decode_request(body)?;
        if sent != self.voters {
            return Ok(wire::encode_inconsistent_voter_set(&self.voters)?);
        }
        let request = metadata_fetch::decode_request(body)?;
        let response = metadata_fetch::serve(raft, backend, dir, observers, request)
            .await
            .map_err(|e| RpcError::Raft(e.to_string()))?;
        Ok(wire::encode_response(&metadata_fetch::encode_response(
            &response,
        )))
    }

    /// Asks for a snapshot of the applied image (written in the background).
    pub async fn trigger_snapshot(&self) -> Result<(), QuorumError> {
        match &self.member {
            Member::Voter { raft, .. } => raft
                .trigger()
                .snapshot()
                .await
                .map_err(|e| QuorumError::Raft(e.to_string())),
            Member::Observer(observer) => Ok(observer.trigger_snapshot().await?),
        }
    }

    pub async fn shutdown(&self) {
        match &self.member {
            Member::Voter { raft, .. } => {
                if let Err(error) = raft.shutdown().await {
                    tracing::warn!(%error, "the controller quorum did not stop cleanly");
                }
            }
            Member::Observer(observer) => observer.shutdown(),
        }
    }
}
