//! openraft's state machine: committed entries go, in order, to an `Applier` (the controller
//! side), and a snapshot is the applier's image written as Kafka's
//! `<end offset>-<epoch>.checkpoint` (with the voters, KIP-853), moved between nodes as the
//! file's bytes.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use krust_storage::kraft_snapshot::{self, SnapshotId};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use tokio::sync::Mutex;

use crate::codec::{decode_voters, kraft_version_value, voters_value, KRAFT_VERSION, KRAFT_VOTERS};
use crate::voters::StaticVoters;
use crate::wall_clock_ms;
use crate::{epoch_of, KRaft, LogId, MetadataRecord, SnapshotMeta, StoredMembership};

/// A committed normal entry as the applier gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedRecord {
    pub offset: i64,
    pub epoch: i32,
    pub value: Bytes,
}

#[derive(Debug, thiserror::Error)]
#[error("the metadata applier failed: {0}")]
pub struct ApplyError(pub String);

/// The metadata state machine's owner (the controller). Calls block until it is done.
pub trait Applier: Send + Sync + 'static {
    /// Applies committed records, in log order; returning acknowledges them.
    fn apply(&self, records: Vec<AppliedRecord>) -> Result<(), ApplyError>;
    /// The records of the image at the last applied offset (no apply runs meanwhile);
    /// `None` while that offset is inside a metadata transaction (KIP-868), whose records a
    /// snapshot must neither hold nor lose.
    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError>;
    /// Replaces the image with a snapshot's, which ends (exclusively) at `end_offset`.
    fn load_snapshot(&self, end_offset: i64, records: Vec<Bytes>) -> Result<(), ApplyError>;
}

/// Called with each snapshot written (the metadata log's retention runs after it).
pub trait SnapshotListener: Send + Sync + 'static {
    fn snapshot_written(&self, id: SnapshotId);
}

struct SmState {
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    /// When the last applied entry was applied: the snapshot's LastContainedLogTimestamp.
    last_applied_ms: i64,
    current: Option<(SnapshotId, SnapshotMeta)>,
}

#[derive(Clone)]
pub struct StateMachine {
    applier: Arc<dyn Applier>,
    dir: PathBuf,
    voters: StaticVoters,
    listener: Option<Arc<dyn SnapshotListener>>,
    state: Arc<Mutex<SmState>>,
}

fn other(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(error.to_string())
}

impl StateMachine {
    /// The state machine whose snapshots are in `dir`. The newest snapshot, if any, is
    /// loaded into the applier now (blocking); a snapshot naming other voters is refused.
    pub fn open(
        dir: PathBuf,
        applier: Arc<dyn Applier>,
        voters: StaticVoters,
        listener: Option<Arc<dyn SnapshotListener>>,
    ) -> io::Result<Self> {
        let newest = kraft_snapshot::recover_snapshots(&dir, 0)
            .map_err(other)?
            .last()
            .copied();
        let mut state = SmState {
            last_applied: None,
            last_membership: StoredMembership::default(),
            last_applied_ms: wall_clock_ms(),
            current: None,
        };
        if let Some(id) = newest {
            let snapshot = kraft_snapshot::read_snapshot(&dir, id).map_err(other)?;
            let meta = snapshot_meta(id, &snapshot.control_records, &voters)?;
            applier
                .load_snapshot(id.end_offset, snapshot.records)
                .map_err(other)?;
            state.last_applied = meta.last_log_id;
            state.last_membership = meta.last_membership.clone();
            state.current = Some((id, meta));
        }
        Ok(Self {
            applier,
            dir,
            voters,
            listener,
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// The last applied entry's log id.
    pub async fn last_applied(&self) -> Option<LogId> {
        self.state.lock().await.last_applied
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Applier) -> Result<T, ApplyError> + Send + 'static,
    ) -> io::Result<T> {
        let applier = Arc::clone(&self.applier);
        tokio::task::spawn_blocking(move || f(applier.as_ref()))
            .await
            .map_err(other)?
            .map_err(other)
    }
}

/// A snapshot file's meta: its last entry, and the voters it names (the configured ones for
/// snapshots earlier krust wrote without them). The membership's log id is taken to be the
/// snapshot's last: the voter set is static, so no other membership can follow it.
pub(crate) fn snapshot_meta(
    id: SnapshotId,
    control_records: &[(i16, Bytes)],
    configured: &StaticVoters,
) -> io::Result<SnapshotMeta> {
    let voters = match control_records
        .iter()
        .find(|(kind, _)| *kind == KRAFT_VOTERS)
    {
        Some((_, value)) => decode_voters(&mut value.clone())?,
        None => configured.clone(),
    };
    configured.check_same(&voters).map_err(other)?;
    let last = u64::try_from(id.end_offset - 1)
        .ok()
        .zip(u64::try_from(id.epoch).ok())
        .map(|(index, term)| LogId::new_term_index(term, index));
    Ok(SnapshotMeta {
        last_log_id: last,
        last_membership: StoredMembership::new(last, voters.membership()),
    })
}

/// Writes the image's `records` as the snapshot `id`, with the KRaftVersionRecord and
/// VotersRecord after the header as Kafka writes them.
pub(crate) fn write_image_snapshot(
    dir: &std::path::Path,
    id: SnapshotId,
    voters: &StaticVoters,
    last_contained_timestamp: i64,
    records: &[Bytes],
) -> io::Result<()> {
    let control = [
        (KRAFT_VERSION, kraft_version_value()),
        (KRAFT_VOTERS, voters_value(voters)?),
    ];
    kraft_snapshot::write_snapshot_with_control(
        dir,
        id,
        last_contained_timestamp,
        &control,
        records,
        wall_clock_ms(),
    )
    .map_err(other)?;
    tracing::info!(snapshot = %id.file_name(), "wrote a metadata snapshot");
    Ok(())
}

fn snapshot_id(last: &LogId) -> io::Result<SnapshotId> {
    Ok(SnapshotId {
        end_offset: i64::try_from(last.index + 1).map_err(other)?,
        epoch: epoch_of(last.leader_id.term)?,
    })
}

type Snapshot = openraft::type_config::alias::SnapshotOf<KRaft, Bytes>;

/// How often a snapshot waiting for a metadata transaction to end looks again, and for how
/// long before it settles for the newest snapshot there is.
const TRANSACTION_END_POLL: std::time::Duration = std::time::Duration::from_millis(20);
const TRANSACTION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl RaftSnapshotBuilder<KRaft> for StateMachine {
    type SnapshotData = Bytes;

    /// Snapshots the image at the first applied offset outside a metadata transaction from
    /// now on: inside one, the state is let go so applies go on until the transaction ends.
    /// A transaction still open after TRANSACTION_WAIT (no quorum to end it) gets the newest
    /// snapshot there is instead, once there is one.
    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let deadline = tokio::time::Instant::now() + TRANSACTION_WAIT;
        loop {
            let mut state = self.state.lock().await;
            let last = state
                .last_applied
                .ok_or_else(|| io::Error::other("nothing applied yet to snapshot"))?;
            let id = snapshot_id(&last)?;
            let waited = tokio::time::Instant::now() >= deadline;
            if state.current.as_ref().map(|(c, _)| *c) != Some(id)
                && !(waited && state.current.is_some())
            {
                let Some(records) = self.blocking(|applier| applier.snapshot()).await? else {
                    drop(state);
                    tokio::time::sleep(TRANSACTION_END_POLL).await;
                    continue;
                };
                let (dir, voters) = (self.dir.clone(), self.voters.clone());
                let timestamp = state.last_applied_ms;
                tokio::task::spawn_blocking(move || {
                    write_image_snapshot(&dir, id, &voters, timestamp, &records)
                })
                .await
                .map_err(other)??;
                let meta = SnapshotMeta {
                    last_log_id: Some(last),
                    last_membership: state.last_membership.clone(),
                };
                state.current = Some((id, meta));
                if let Some(listener) = &self.listener {
                    listener.snapshot_written(id);
                }
            }
            let (id, meta) = state.current.clone().expect("set above");
            let bytes = kraft_snapshot::read_snapshot_file(&self.dir, id).map_err(other)?;
            return Ok(Snapshot {
                meta,
                snapshot: bytes,
            });
        }
    }
}

impl RaftStateMachine<KRaft> for StateMachine {
    type SnapshotData = Bytes;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let state = self.state.lock().await;
        Ok((state.last_applied, state.last_membership.clone()))
    }

    async fn apply<Strm>(&mut self, entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<KRaft>, io::Error>> + Unpin + OptionalSend,
    {
        let mut state = self.state.lock().await;
        let entries: Vec<EntryResponder<KRaft>> = entries.try_collect().await?;
        let mut records = Vec::new();
        for (entry, _) in &entries {
            match &entry.payload {
                EntryPayload::Normal(MetadataRecord(value)) => records.push(AppliedRecord {
                    offset: i64::try_from(entry.log_id.index).map_err(other)?,
                    epoch: epoch_of(entry.log_id.leader_id.term)?,
                    value: value.clone(),
                }),
                EntryPayload::Membership(membership) => {
                    state.last_membership =
                        StoredMembership::new(Some(entry.log_id), membership.clone());
                }
                EntryPayload::Blank => {}
            }
        }
        if !records.is_empty() {
            self.blocking(move |applier| applier.apply(records)).await?;
        }
        if let Some((last, _)) = entries.last() {
            state.last_applied = Some(last.log_id);
            state.last_applied_ms = wall_clock_ms();
        }
        for (_, responder) in entries {
            if let Some(responder) = responder {
                responder.send(());
            }
        }
        Ok(())
    }

    /// Nothing to snapshot before the first entry is applied.
    async fn try_create_snapshot_builder(&mut self, _force: bool) -> Option<Self::SnapshotBuilder> {
        let applied = self.state.lock().await.last_applied.is_some();
        applied.then(|| self.clone())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Bytes,
    ) -> Result<(), io::Error> {
        let last = meta
            .last_log_id
            .ok_or_else(|| io::Error::other("a snapshot without a last log id"))?;
        let id = snapshot_id(&last)?;
        let mut state = self.state.lock().await;
        let dir = self.dir.clone();
        let installed = tokio::task::spawn_blocking(move || {
            kraft_snapshot::install_snapshot_file(&dir, id, &snapshot)
        })
        .await
        .map_err(other)?
        .map_err(other)?;
        snapshot_meta(id, &installed.control_records, &self.voters)?;
        let records = installed.records;
        self.blocking(move |applier| applier.load_snapshot(id.end_offset, records))
            .await?;
        state.last_applied = Some(last);
        state.last_membership = meta.last_membership.clone();
        state.current = Some((id, meta.clone()));
        tracing::info!(snapshot = %id.file_name(), "installed a metadata snapshot from the leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        let state = self.state.lock().await;
        let Some((id, meta)) = state.current.clone() else {
            return Ok(None);
        };
        let bytes = kraft_snapshot::read_snapshot_file(&self.dir, id).map_err(other)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: bytes,
        }))
    }
}
