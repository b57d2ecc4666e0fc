//! openraft's log storage on a `LogBackend`: entries encoded as Kafka batches (`codec`), the
//! vote as `quorum-state`. Blocking I/O runs on tokio's blocking pool, one call at a time, so
//! appends complete (and call back) in order, each after its fsync.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::BytesMut;
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use parking_lot::Mutex;

use crate::codec::{decode_entries, encode_entry, EncodeContext};
use crate::log_backend::LogBackend;
use crate::voters::StaticVoters;
use crate::{Entry, KRaft, LogId, Vote};

/// About this many bytes are read per backend call.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// The Raft log of one node. Clones share the backend (the log reader is a clone).
pub struct LogStore<B> {
    backend: Arc<Mutex<B>>,
    voters: StaticVoters,
    /// The last entry no longer in the log (purged or covered by the snapshot it starts at).
    last_purged: Arc<Mutex<Option<LogId>>>,
}

impl<B> Clone for LogStore<B> {
    fn clone(&self) -> Self {
        Self {
            backend: Arc::clone(&self.backend),
            voters: self.voters.clone(),
            last_purged: Arc::clone(&self.last_purged),
        }
    }
}

impl<B: LogBackend> LogStore<B> {
    /// The store on `backend`.
    pub fn open(backend: Arc<Mutex<B>>, voters: StaticVoters) -> io::Result<Self> {
        let last_purged = backend.lock().last_purged()?;
        Ok(Self {
            backend,
            voters,
            last_purged: Arc::new(Mutex::new(last_purged)),
        })
    }

    pub fn backend(&self) -> &Arc<Mutex<B>> {
        &self.backend
    }

    /// Runs `f` on the backend on the blocking pool.
    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut B) -> io::Result<T> + Send + 'static,
    {
        let backend = Arc::clone(&self.backend);
        tokio::task::spawn_blocking(move || f(&mut backend.lock()))
            .await
            .map_err(io::Error::other)?
    }

    /// The entries with indexes in `[from, to)`.
    pub async fn read_entries(&self, from: u64, to: u64) -> io::Result<Vec<Entry>> {
        self.blocking(move |backend| read_range(backend, from, to))
            .await
    }

    /// The last entry's log id, or `None` for an empty log.
    pub async fn last_entry(&self) -> io::Result<Option<LogId>> {
        self.blocking(|backend| {
            let end = backend.end_offset();
            if end <= backend.start_offset() {
                return Ok(None);
            }
            Ok(read_range(backend, end - 1, end)?.pop().map(|e| e.log_id))
        })
        .await
    }

    /// Encodes and appends `entries` with one fsync.
    pub async fn append_entries(&self, entries: Vec<Entry>) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        // The voter set is static: a leader proposing another one is refused.
        for entry in &entries {
            if let Some(membership) = entry.get_membership() {
                let proposed = StaticVoters::from_membership(&membership)
                    .map_err(|e| io::Error::other(e.to_string()))?;
                self.voters
                    .check_same(&proposed)
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
        }
        let voters = self.voters.clone();
        self.blocking(move |backend| {
            let vote = backend.read_vote()?;
            let now_ms = crate::wall_clock_ms();
            let mut out = BytesMut::new();
            for entry in &entries {
                // A blank entry is written by its term's leader: the vote names it then.
                let leader_id = vote
                    .filter(|v| v.leader_id.term == entry.log_id.leader_id.term)
                    .map_or(-1, |v| v.leader_id.voted_for);
                let cx = EncodeContext {
                    leader_id,
                    voters: &voters,
                    now_ms,
                };
                encode_entry(&mut out, entry, &cx)?;
            }
            backend.append(out.freeze())?;
            backend.flush()
        })
        .await
    }
}

/// Entries `[from, to)`, decoding whole batches and dropping what lies outside.
fn read_range<B: LogBackend>(backend: &B, from: u64, to: u64) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    let to = to.min(backend.end_offset());
    let mut next = from.max(backend.start_offset());
    while next < to {
        let bytes = backend.read(next, READ_CHUNK_BYTES)?;
        if bytes.is_empty() {
            return Err(io::Error::other(format!(
                "the metadata log has nothing at offset {next} (end {to})"
            )));
        }
        for entry in decode_entries(bytes)? {
            let index = entry.index();
            if index < next {
                continue;
            }
            if index != next {
                return Err(crate::invalid_data(format!(
                    "the metadata log skips from offset {next} to {index}"
                )));
            }
            if index >= to {
                break;
            }
            entries.push(entry);
            next += 1;
        }
    }
    Ok(entries)
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(i) => *i,
        Bound::Excluded(i) => i + 1,
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(i) => i + 1,
        Bound::Excluded(i) => *i,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl<B: LogBackend> RaftLogReader<KRaft> for LogStore<B> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (from, to) = bounds(&range);
        self.read_entries(from, to).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.blocking(|backend| backend.read_vote()).await
    }
}

impl<B: LogBackend> RaftLogStorage<KRaft> for LogStore<B> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<KRaft>, io::Error> {
        let last_purged = *self.last_purged.lock();
        let last = self.last_entry().await?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let vote = *vote;
        let voters: Vec<_> = self.voters.ids().into_iter().collect();
        self.blocking(move |backend| backend.save_vote(&vote, &voters))
            .await
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<KRaft>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let result = self.append_entries(entries.into_iter().collect()).await;
        match &result {
            Ok(()) => callback.io_completed(Ok(())),
            Err(error) => {
                callback.io_completed(Err(io::Error::new(error.kind(), error.to_string())))
            }
        }
        result
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |id| id.index + 1);
        self.blocking(move |backend| backend.truncate_from(from))
            .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        *self.last_purged.lock() = Some(log_id);
        self.blocking(move |backend| backend.purge_to(log_id)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        if let Some(committed) = committed {
            self.blocking(move |backend| {
                backend.committed_to(committed.index + 1);
                Ok(())
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
