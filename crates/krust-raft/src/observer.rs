//! An observer of the controller quorum (a node with `process.roles=broker`): it keeps a copy
//! of the committed metadata log in its own `__cluster_metadata-0` by fetching it from the
//! voters (`metadata_fetch`), hands the records to the same `Applier` a voter does, and writes
//! its own snapshots when asked, as Kafka's brokers do (docs/quorum.md#observers).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use krust_storage::kraft_snapshot::{self, SnapshotId};
use krust_wire::{Connection, ConnectionConfig};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use crate::codec::decode_entries;
use crate::log_backend::{KafkaLogBackend, LogBackend};
use crate::metadata_fetch::{self, FetchedData, MetadataFetchRequest, MetadataFetchResponse};
use crate::quorum::QuorumStatus;
use crate::state_machine::{snapshot_meta, write_image_snapshot, SnapshotListener};
use crate::wall_clock_ms;
use crate::wire::{self, MAX_FRAME_BYTES, METADATA_FETCH};
use crate::{AppliedRecord, Applier, LogId, NodeId, StaticVoters};

/// How long one fetch may take, its long poll included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// About this many bytes of the local log are replayed per read at start-up.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// What the observer knows of the quorum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Known {
    leader_id: NodeId,
    leader_epoch: i32,
    high_watermark: i64,
}

type SnapshotReply = oneshot::Sender<io::Result<()>>;

/// A running observer; dropping it does not stop it, `shutdown` does.
pub struct Observer {
    node_id: NodeId,
    known: watch::Receiver<Known>,
    snapshots: mpsc::UnboundedSender<SnapshotReply>,
    stop: watch::Sender<bool>,
}

/// The observer's log, snapshots and applier: everything the fetch loop changes.
struct Replica {
    backend: Arc<Mutex<KafkaLogBackend>>,
    dir: PathBuf,
    voters: StaticVoters,
    applier: Arc<dyn Applier>,
    listener: Option<Arc<dyn SnapshotListener>>,
    /// The offset the next entry gets: everything below it is applied.
    next: i64,
    /// The leader epoch of the entry just below `next`.
    last_epoch: i32,
    last_applied_ms: i64,
}

impl Observer {
    /// Loads the newest local snapshot and replays the local log into `applier` (blocking
    /// work, done before this returns), then fetches what follows from the voters.
    pub async fn start(
        node_id: NodeId,
        voters: StaticVoters,
        backend: Arc<Mutex<KafkaLogBackend>>,
        applier: Arc<dyn Applier>,
        listener: Option<Arc<dyn SnapshotListener>>,
    ) -> io::Result<Self> {
        let dir = backend.lock().log().lock().dir().to_path_buf();
        let mut replica = Replica {
            backend,
            dir,
            voters,
            applier,
            listener,
            next: 0,
            last_epoch: 0,
            last_applied_ms: wall_clock_ms(),
        };
        let replica = tokio::task::spawn_blocking(move || replica.open().map(|()| replica))
            .await
            .map_err(io::Error::other)??;
        let (known_tx, known) = watch::channel(Known {
            leader_id: -1,
            leader_epoch: replica.last_epoch,
            high_watermark: replica.next,
        });
        let (snapshots, requests) = mpsc::unbounded_channel();
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(fetch_loop(node_id, replica, known_tx, requests, stopped));
        Ok(Self {
            node_id,
            known,
            snapshots,
            stop,
        })
    }

    /// DescribeQuorum's view from an observer: the leader it last heard of, no voter details.
    pub fn status(&self) -> QuorumStatus {
        let known = *self.known.borrow();
        QuorumStatus {
            node_id: self.node_id,
            leader_id: known.leader_id,
            leader_epoch: known.leader_epoch,
            high_watermark: known.high_watermark,
            is_leader: false,
            voters: Vec::new(),
            observers: Vec::new(),
        }
    }

    /// (leader id or -1, epoch) as the observer learns them.
    pub fn leader_changes(&self) -> impl futures_util::Stream<Item = (NodeId, i32)> {
        let known = self.known.clone();
        futures_util::stream::unfold((known, None), |(mut known, last)| async move {
            loop {
                let now = {
                    let k = known.borrow_and_update();
                    (k.leader_id, k.leader_epoch)
                };
                if last != Some(now) {
                    return Some((now, (known, Some(now))));
                }
                known.changed().await.ok()?;
            }
        })
    }

    /// Writes a snapshot of the applied image (between two fetches, so no apply runs).
    pub async fn trigger_snapshot(&self) -> io::Result<()> {
        let (reply, answer) = oneshot::channel();
        self.snapshots
            .send(reply)
            .map_err(|_| io::Error::other("the metadata observer has stopped"))?;
        answer
            .await
            .map_err(|_| io::Error::other("the metadata observer has stopped"))?
    }

    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}

impl Replica {
    /// The newest snapshot, then the local log after it: every entry in it was committed when
    /// it was fetched.
    fn open(&mut self) -> io::Result<()> {
        let newest = kraft_snapshot::recover_snapshots(&self.dir, 0)
            .map_err(io::Error::other)?
            .last()
            .copied();
        if let Some(id) = newest {
            let snapshot =
                kraft_snapshot::read_snapshot(&self.dir, id).map_err(io::Error::other)?;
            snapshot_meta(id, &snapshot.control_records, &self.voters)?;
            self.load(id, snapshot.records)?;
        }
        let (start, end) = {
            let backend = self.backend.lock();
            (backend.start_offset() as i64, backend.end_offset() as i64)
        };
        if start > self.next || end < self.next {
            // The log does not go on from the snapshot: fetch again from the snapshot's end.
            self.reset_log_to(self.next)?;
        }
        while self.next < end {
            let batches = self
                .backend
                .lock()
                .read(self.next as u64, REPLAY_CHUNK_BYTES)?;
            if batches.is_empty() {
                break;
            }
            self.apply(&batches)?;
        }
        self.backend.lock().committed_to(self.next as u64);
        Ok(())
    }

    fn load(&mut self, id: SnapshotId, records: Vec<Bytes>) -> io::Result<()> {
        self.applier
            .load_snapshot(id.end_offset, records)
            .map_err(io::Error::other)?;
        self.next = id.end_offset;
        self.last_epoch = id.epoch;
        Ok(())
    }

    fn reset_log_to(&mut self, offset: i64) -> io::Result<()> {
        self.backend
            .lock()
            .log()
            .lock()
            .truncate_fully_and_start_at(offset)
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Hands the normal entries of `batches` at or after `next` to the applier.
    fn apply(&mut self, batches: &Bytes) -> io::Result<()> {
        let mut records = Vec::new();
        for entry in decode_entries(batches.clone())? {
            let offset = entry.log_id.index as i64;
            if offset < self.next {
                continue;
            }
            let epoch = crate::epoch_of(entry.log_id.leader_id.term)?;
            if let openraft::EntryPayload::Normal(crate::MetadataRecord(value)) = entry.payload {
                records.push(AppliedRecord {
                    offset,
                    epoch,
                    value,
                });
            }
            self.next = offset + 1;
            self.last_epoch = epoch;
        }
        if !records.is_empty() {
            self.applier.apply(records).map_err(io::Error::other)?;
        }
        self.last_applied_ms = wall_clock_ms();
        Ok(())
    }

    /// Appends committed batches fetched from a voter durably, then applies them.
    fn append(&mut self, batches: Bytes) -> io::Result<()> {
        {
            let mut backend = self.backend.lock();
            backend.append(batches.clone())?;
            backend.flush()?;
        }
        self.apply(&batches)?;
        self.backend.lock().committed_to(self.next as u64);
        Ok(())
    }

    /// Replaces the log with a voter's snapshot: the voter no longer had what came next.
    fn install(&mut self, id: SnapshotId, contents: &[u8]) -> io::Result<()> {
        let installed = kraft_snapshot::install_snapshot_file(&self.dir, id, contents)
            .map_err(io::Error::other)?;
        snapshot_meta(id, &installed.control_records, &self.voters)?;
        let term = u64::try_from(id.epoch).map_err(io::Error::other)?;
        let last = u64::try_from(id.end_offset - 1).map_err(io::Error::other)?;
        self.backend
            .lock()
            .purge_to(LogId::new_term_index(term, last))?;
        self.load(id, installed.records)?;
        tracing::info!(snapshot = %id.file_name(), "installed a metadata snapshot from a controller");
        self.snapshot_written(id);
        Ok(())
    }

    fn write_snapshot(&mut self) -> io::Result<()> {
        if self.next == 0 {
            return Ok(());
        }
        let id = SnapshotId {
            end_offset: self.next,
            epoch: self.last_epoch,
        };
        if id.path(&self.dir).exists() {
            return Ok(());
        }
        let Some(records) = self.applier.snapshot().map_err(io::Error::other)? else {
            // Inside a metadata transaction: the next trigger, after it ends, writes one.
            return Ok(());
        };
        write_image_snapshot(&self.dir, id, &self.voters, self.last_applied_ms, &records)?;
        self.snapshot_written(id);
        Ok(())
    }

    fn snapshot_written(&self, id: SnapshotId) {
        if let Some(listener) = &self.listener {
            listener.snapshot_written(id);
        }
    }

    fn take_fetched(&mut self, data: FetchedData) -> io::Result<()> {
        match data {
            FetchedData::Records(batches) if batches.is_empty() => Ok(()),
            FetchedData::Records(batches) => self.append(batches),
            FetchedData::Snapshot { id, contents } => self.install(id, &contents),
        }
    }
}

/// Runs `f` on `replica` on the blocking pool and gives the replica back.
async fn blocking(
    mut replica: Replica,
    f: impl FnOnce(&mut Replica) -> io::Result<()> + Send + 'static,
) -> (Replica, io::Result<()>) {
    match tokio::task::spawn_blocking(move || {
        let result = f(&mut replica);
        (replica, result)
    })
    .await
    {
        Ok(done) => done,
        Err(error) => panic!("the metadata observer's blocking task failed: {error}"),
    }
}

/// The peer to fetch from and its connection.
struct Peer {
    id: NodeId,
    stream: Option<Connection>,
}

async fn fetch_loop(
    node_id: NodeId,
    mut replica: Replica,
    known: watch::Sender<Known>,
    mut snapshots: mpsc::UnboundedReceiver<SnapshotReply>,
    mut stop: watch::Receiver<bool>,
) {
    let ids: Vec<NodeId> = replica.voters.ids().into_iter().collect();
    let client_id = format!("krust-observer-{node_id}");
    let mut peer = Peer {
        id: ids[0],
        stream: None,
    };
    let mut backoff = FIRST_BACKOFF;
    while !*stop.borrow() {
        while let Ok(reply) = snapshots.try_recv() {
            let (back, result) = blocking(replica, Replica::write_snapshot).await;
            replica = back;
            let _ = reply.send(result);
        }
        let request = MetadataFetchRequest {
            replica_id: node_id,
            fetch_offset: replica.next,
            max_wait_ms: metadata_fetch::MAX_WAIT_MS,
            max_bytes: metadata_fetch::MAX_BYTES,
        };
        let fetched = tokio::select! {
            fetched = fetch(&mut peer, &replica.voters, &client_id, &request) => fetched,
            _ = stop.changed() => break,
        };
        let failure = match fetched {
            Ok(response) => {
                let MetadataFetchResponse {
                    leader_id,
                    leader_epoch,
                    high_watermark,
                    data,
                } = response;
                let (back, applied) = blocking(replica, move |r| r.take_fetched(data)).await;
                replica = back;
                known.send_replace(Known {
                    leader_id,
                    leader_epoch,
                    high_watermark: high_watermark.max(replica.next),
                });
                if leader_id >= 0 && leader_id != peer.id && ids.contains(&leader_id) {
                    peer = Peer {
                        id: leader_id,
                        stream: None,
                    };
                }
                applied.err()
            }
            Err(error) => Some(error),
        };
        match failure {
            None => backoff = FIRST_BACKOFF,
            Some(error) => {
                tracing::warn!(controller = peer.id, %error, "fetching the metadata log failed; trying another controller");
                let position = ids.iter().position(|id| *id == peer.id).unwrap_or(0);
                peer = Peer {
                    id: ids[(position + 1) % ids.len()],
                    stream: None,
                };
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => break,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

async fn fetch(
    peer: &mut Peer,
    voters: &StaticVoters,
    client_id: &str,
    request: &MetadataFetchRequest,
) -> io::Result<MetadataFetchResponse> {
    let exchange = async {
        let connection = match peer.stream.take() {
            Some(connection) if !connection.is_closed() => connection,
            _ => {
                let voter = voters
                    .get(peer.id)
                    .ok_or_else(|| io::Error::other(format!("node {} is not a voter", peer.id)))?;
                let mut config =
                    ConnectionConfig::new(client_id).with_request_timeout(FETCH_TIMEOUT);
                config.max_response_bytes = MAX_FRAME_BYTES;
                Connection::connect(&voter.address(), Arc::new(config))
                    .await
                    .map_err(io::Error::other)?
            }
        };
        let body = wire::encode_request(voters, &metadata_fetch::encode_request(request))
            .map_err(io::Error::other)?;
        // Quorum requests have header v1, their responses v0 (the correlation id alone).
        let answered = connection
            .send_raw(METADATA_FETCH, wire::VERSION, (1, 0), &body, FETCH_TIMEOUT)
            .await
            .map_err(io::Error::other);
        peer.stream = Some(connection);
        answered
    };
    let response = tokio::time::timeout(FETCH_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")))
        .and_then(
            |body| match wire::decode_response(body).map_err(io::Error::other)? {
                wire::Answer::Body(body) => {
                    metadata_fetch::decode_response(body).map_err(io::Error::other)
                }
                wire::Answer::InconsistentVoterSet(theirs) => Err(io::Error::other(format!(
                    "controller {} refused this node with INCONSISTENT_VOTER_SET: its \
                 controller.quorum.voters is {theirs}, this node's is {voters}",
                    peer.id
                ))),
            },
        );
    if response.is_err() {
        peer.stream = None;
    }
    response
}
