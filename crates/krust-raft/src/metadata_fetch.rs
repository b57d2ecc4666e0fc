//! MetadataFetch: how an observer (a node with `process.roles=broker`, not a voter) copies the
//! committed metadata log from a voter, as KRaft's observers fetch `__cluster_metadata-0`
//! (docs/quorum.md#observers). openraft pushes to voters only, so this is krust's own private
//! RPC beside the quorum's, on the controller listener.
//!
//! A voter answers with committed entries only, so an observer's log is always a prefix of
//! the committed log: it is never truncated, only replaced by a snapshot when the voter no
//! longer has the entries it asks for.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use krust_storage::batch::{split_batches, BatchHeader};
use krust_storage::kraft_snapshot::{self, SnapshotId};
use parking_lot::Mutex;

use crate::log_backend::LogBackend;
use crate::quorum::{self, ReplicaStatus};
use crate::wire::{put_bytes, Reader, WireError};
use crate::{NodeId, Raft};

/// The longest a fetch at the committed end waits for new entries.
pub const MAX_WAIT_MS: i32 = 500;
/// About this many bytes of entries per answer.
pub const MAX_BYTES: i32 = 1 << 20;
/// Kafka's leader forgets an observer after this long without a fetch.
const OBSERVER_SESSION_TIMEOUT_MS: i64 = 300_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataFetchRequest {
    pub replica_id: NodeId,
    /// The offset the observer's log ends at.
    pub fetch_offset: i64,
    pub max_wait_ms: i32,
    pub max_bytes: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchedData {
    /// Whole committed batches from the fetch offset on (none: nothing new in time).
    Records(Bytes),
    /// The voter no longer has the fetch offset: its newest snapshot file, whole.
    Snapshot { id: SnapshotId, contents: Bytes },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataFetchResponse {
    /// -1 when the voter knows no leader.
    pub leader_id: NodeId,
    pub leader_epoch: i32,
    /// Offsets below it are committed.
    pub high_watermark: i64,
    pub data: FetchedData,
}

pub fn encode_request(request: &MetadataFetchRequest) -> Bytes {
    let mut out = BytesMut::with_capacity(20);
    out.put_i32(request.replica_id);
    out.put_i64(request.fetch_offset);
    out.put_i32(request.max_wait_ms);
    out.put_i32(request.max_bytes);
    out.freeze()
}

pub fn decode_request(body: Bytes) -> Result<MetadataFetchRequest, WireError> {
    let mut reader = Reader(body);
    let request = MetadataFetchRequest {
        replica_id: reader.i32()?,
        fetch_offset: i64_of(reader.u64()?),
        max_wait_ms: reader.i32()?,
        max_bytes: reader.i32()?,
    };
    reader.end()?;
    if request.fetch_offset < 0 {
        return Err(WireError::Malformed(format!(
            "fetch offset {}",
            request.fetch_offset
        )));
    }
    Ok(request)
}

pub fn encode_response(response: &MetadataFetchResponse) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(response.leader_id);
    out.put_i32(response.leader_epoch);
    out.put_i64(response.high_watermark);
    match &response.data {
        FetchedData::Records(batches) => {
            out.put_u8(0);
            put_bytes(&mut out, batches);
        }
        FetchedData::Snapshot { id, contents } => {
            out.put_u8(1);
            out.put_i64(id.end_offset);
            out.put_i32(id.epoch);
            put_bytes(&mut out, contents);
        }
    }
    out.freeze()
}

pub fn decode_response(body: Bytes) -> Result<MetadataFetchResponse, WireError> {
    let mut reader = Reader(body);
    let leader_id = reader.i32()?;
    let leader_epoch = reader.i32()?;
    let high_watermark = i64_of(reader.u64()?);
    let data = match reader.u8()? {
        0 => FetchedData::Records(reader.bytes()?),
        1 => {
            let end_offset = i64_of(reader.u64()?);
            let epoch = reader.i32()?;
            FetchedData::Snapshot {
                id: SnapshotId { end_offset, epoch },
                contents: reader.bytes()?,
            }
        }
        other => return Err(WireError::Malformed(format!("fetched data kind {other}"))),
    };
    reader.end()?;
    Ok(MetadataFetchResponse {
        leader_id,
        leader_epoch,
        high_watermark,
        data,
    })
}

fn i64_of(value: u64) -> i64 {
    value as i64
}

/// The observers a voter has answered: their log end and when they last fetched, for
/// DescribeQuorum's observers.
#[derive(Clone, Default)]
pub struct Observers(Arc<Mutex<BTreeMap<NodeId, (i64, i64)>>>);

impl Observers {
    fn fetched(&self, replica_id: NodeId, log_end_offset: i64, now_ms: i64) {
        self.0.lock().insert(replica_id, (log_end_offset, now_ms));
    }

    /// DescribeQuorum's view: caught up when the observer's log reached `high_watermark`.
    /// An observer that has not fetched for OBSERVER_SESSION_TIMEOUT_MS is forgotten.
    pub fn status(&self, high_watermark: i64) -> Vec<ReplicaStatus> {
        let now_ms = crate::wall_clock_ms();
        let mut observers = self.0.lock();
        observers.retain(|_, (_, at)| now_ms - *at < OBSERVER_SESSION_TIMEOUT_MS);
        observers
            .iter()
            .map(|(id, (end, at))| ReplicaStatus {
                replica_id: *id,
                log_end_offset: *end,
                last_fetch_timestamp: *at,
                last_caught_up_timestamp: if *end >= high_watermark { *at } else { -1 },
            })
            .collect()
    }
}

/// A voter's answer to `request`: committed batches from its fetch offset (waiting up to
/// its max wait when there are none yet), or the newest snapshot when the log no longer
/// starts at or below the fetch offset.
pub async fn serve<B: LogBackend>(
    raft: &Raft,
    backend: &Arc<Mutex<B>>,
    snapshot_dir: &Path,
    observers: &Observers,
    request: MetadataFetchRequest,
) -> io::Result<MetadataFetchResponse> {
    observers.fetched(
        request.replica_id,
        request.fetch_offset,
        crate::wall_clock_ms(),
    );
    let wait = Duration::from_millis(
        u64::try_from(request.max_wait_ms.clamp(0, MAX_WAIT_MS)).unwrap_or(0),
    );
    let committed_past = |s: &quorum::QuorumStatus| s.high_watermark > request.fetch_offset;
    if !committed_past(&quorum::status(raft)) {
        quorum::wait_for(raft, wait, committed_past).await;
    }
    let status = quorum::status(raft);
    let answer = |data| MetadataFetchResponse {
        leader_id: status.leader_id,
        leader_epoch: status.leader_epoch,
        high_watermark: status.high_watermark,
        data,
    };
    let start = i64::try_from(backend.lock().start_offset()).unwrap_or(i64::MAX);
    if request.fetch_offset < start {
        let id = kraft_snapshot::complete_snapshots(snapshot_dir)
            .map_err(io::Error::other)?
            .last()
            .copied()
            .ok_or_else(|| {
                io::Error::other(format!(
                    "the metadata log starts at {start} and there is no snapshot"
                ))
            })?;
        let contents =
            kraft_snapshot::read_snapshot_file(snapshot_dir, id).map_err(io::Error::other)?;
        return Ok(answer(FetchedData::Snapshot { id, contents }));
    }
    if request.fetch_offset >= status.high_watermark {
        return Ok(answer(FetchedData::Records(Bytes::new())));
    }
    let max_bytes = usize::try_from(request.max_bytes.clamp(1, MAX_BYTES)).unwrap_or(1);
    let read = {
        let backend = Arc::clone(backend);
        let from = u64::try_from(request.fetch_offset).unwrap_or(0);
        tokio::task::spawn_blocking(move || backend.lock().read(from, max_bytes))
            .await
            .map_err(io::Error::other)??
    };
    Ok(answer(FetchedData::Records(committed_batches(
        read,
        status.high_watermark,
    )?)))
}

/// The leading batches of `batches` that end below `high_watermark`.
fn committed_batches(batches: Bytes, high_watermark: i64) -> io::Result<Bytes> {
    let ranges = split_batches(&batches).map_err(|e| io::Error::other(e.to_string()))?;
    let mut end = 0;
    for range in ranges {
        let header = BatchHeader::parse(&batches[range.clone()])
            .ok_or_else(|| io::Error::other("a metadata batch without a header"))?;
        if header.last_offset() >= high_watermark {
            break;
        }
        end = range.end;
    }
    Ok(batches.slice(..end))
}
