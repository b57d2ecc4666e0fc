//! The quorum's RPCs on the wire: Kafka-framed requests (request header v1, response header
//! v0) with krust-private api keys, never advertised in ApiVersions, served only on the
//! controller listener. Entries travel as the record batches they are stored as (`codec`).
//!
//! Bodies are decoded with bounds checks: malformed input is an error, never a panic.
//!
//! Version 1 wraps every body: a request starts with the sender's voters (a VotersRecord
//! value), a response with an error code, INCONSISTENT_VOTER_SET followed by the receiver's
//! voters when the two differ (Kafka's answer to a voter-only request from outside its voter
//! set). Version 0 requests are the bare bodies and are still served.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderError,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};

use crate::codec::{decode_entries, decode_voters, encode_entry, voters_value, EncodeContext};
use crate::voters::StaticVoters;
use crate::{KRaft, LogId, SnapshotMeta, StoredMembership, Vote};

/// The krust-private api keys (outside Kafka's range, which ends below 100).
pub const APPEND_ENTRIES: i16 = 32_001;
pub const VOTE: i16 = 32_002;
pub const PRE_VOTE: i16 = 32_003;
pub const FULL_SNAPSHOT: i16 = 32_004;
pub const TRANSFER_LEADER: i16 = 32_005;
pub const METADATA_FETCH: i16 = 32_006;
pub const VERSION: i16 = 1;
/// Kafka's INCONSISTENT_VOTER_SET error code.
pub const INCONSISTENT_VOTER_SET: i16 = 94;
const NONE: i16 = 0;
/// The largest frame either side accepts (a snapshot travels whole in one).
pub const MAX_FRAME_BYTES: usize = 256 << 20;

pub fn is_quorum_api(api_key: i16) -> bool {
    (APPEND_ENTRIES..=TRANSFER_LEADER).contains(&api_key) || api_key == METADATA_FETCH
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("quorum message cut short")]
    Truncated,
    #[error("quorum message: {0}")]
    Malformed(String),
    #[error("quorum message entries: {0}")]
    Entries(#[from] std::io::Error),
    #[error("unknown quorum api key {0}")]
    UnknownApi(i16),
    #[error("unsupported version {1} of quorum api {0}")]
    UnsupportedVersion(i16, i16),
    #[error("quorum response error code {0}")]
    ErrorCode(i16),
}

/// A version 1 request body: the sender's voters, then `body`.
pub fn encode_request(voters: &StaticVoters, body: &[u8]) -> Result<Bytes, WireError> {
    let mut out = BytesMut::new();
    put_bytes(&mut out, &voters_value(voters)?);
    out.put_slice(body);
    Ok(out.freeze())
}

/// A version 1 request body's sender voters and the body after them.
pub fn decode_request(body: Bytes) -> Result<(StaticVoters, Bytes), WireError> {
    let mut r = Reader(body);
    let mut voters = r.bytes()?;
    Ok((decode_voters(&mut voters)?, r.0))
}

/// A version 1 response body: no error, then `body`.
pub fn encode_response(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + body.len());
    out.put_i16(NONE);
    out.put_slice(body);
    out.freeze()
}

/// A version 1 response refusing a sender whose voters differ from the receiver's `voters`.
pub fn encode_inconsistent_voter_set(voters: &StaticVoters) -> Result<Bytes, WireError> {
    let mut out = BytesMut::new();
    out.put_i16(INCONSISTENT_VOTER_SET);
    put_bytes(&mut out, &voters_value(voters)?);
    Ok(out.freeze())
}

/// What a version 1 response says: the body, or the receiver's voters when they differ from
/// the sender's.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Body(Bytes),
    InconsistentVoterSet(StaticVoters),
}

pub fn decode_response(body: Bytes) -> Result<Answer, WireError> {
    let mut r = Reader(body);
    r.need(2)?;
    match r.0.get_i16() {
        NONE => Ok(Answer::Body(r.0)),
        INCONSISTENT_VOTER_SET => {
            let mut voters = r.bytes()?;
            r.end()?;
            Ok(Answer::InconsistentVoterSet(decode_voters(&mut voters)?))
        }
        other => Err(WireError::ErrorCode(other)),
    }
}

pub(crate) struct Reader(pub(crate) Bytes);

impl Reader {
    pub(crate) fn need(&self, n: usize) -> Result<(), WireError> {
        (self.0.remaining() >= n)
            .then_some(())
            .ok_or(WireError::Truncated)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, WireError> {
        self.need(1)?;
        Ok(self.0.get_u8())
    }

    pub(crate) fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(WireError::Malformed(format!("boolean {other}"))),
        }
    }

    pub(crate) fn i32(&mut self) -> Result<i32, WireError> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }

    pub(crate) fn u64(&mut self) -> Result<u64, WireError> {
        self.need(8)?;
        Ok(self.0.get_u64())
    }

    pub(crate) fn bytes(&mut self) -> Result<Bytes, WireError> {
        let len = usize::try_from(self.i32()?)
            .map_err(|_| WireError::Malformed("negative length".into()))?;
        self.need(len)?;
        Ok(self.0.split_to(len))
    }

    fn vote(&mut self) -> Result<Vote, WireError> {
        let term = self.u64()?;
        let node = self.i32()?;
        let mut vote = Vote::new(term, node);
        vote.committed = self.bool()?;
        Ok(vote)
    }

    fn log_id(&mut self) -> Result<Option<LogId>, WireError> {
        if !self.bool()? {
            return Ok(None);
        }
        let term = self.u64()?;
        Ok(Some(LogId::new_term_index(term, self.u64()?)))
    }

    pub(crate) fn end(self) -> Result<(), WireError> {
        if self.0.has_remaining() {
            return Err(WireError::Malformed(format!(
                "{} bytes after the message",
                self.0.remaining()
            )));
        }
        Ok(())
    }
}

pub(crate) fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    out.put_i32(bytes.len() as i32);
    out.put_slice(bytes);
}

fn put_vote(out: &mut BytesMut, vote: &Vote) {
    out.put_u64(vote.leader_id.term);
    out.put_i32(vote.leader_id.voted_for);
    out.put_u8(u8::from(vote.committed));
}

fn put_log_id(out: &mut BytesMut, log_id: &Option<LogId>) {
    match log_id {
        None => out.put_u8(0),
        Some(id) => {
            out.put_u8(1);
            out.put_u64(id.leader_id.term);
            out.put_u64(id.index);
        }
    }
}

pub fn encode_append_request(
    request: &AppendEntriesRequest<KRaft>,
    voters: &StaticVoters,
) -> Result<Bytes, WireError> {
    let mut out = BytesMut::new();
    put_vote(&mut out, &request.vote);
    put_log_id(&mut out, &request.prev_log_id);
    put_log_id(&mut out, &request.leader_commit);
    let mut batches = BytesMut::new();
    let cx = EncodeContext {
        leader_id: request.vote.leader_id.voted_for,
        voters,
        now_ms: crate::wall_clock_ms(),
    };
    for entry in &request.entries {
        encode_entry(&mut batches, entry, &cx)?;
    }
    put_bytes(&mut out, &batches);
    Ok(out.freeze())
}

pub fn decode_append_request(body: Bytes) -> Result<AppendEntriesRequest<KRaft>, WireError> {
    let mut r = Reader(body);
    let vote = r.vote()?;
    let prev_log_id = r.log_id()?;
    let leader_commit = r.log_id()?;
    let batches = r.bytes()?;
    r.end()?;
    let entries = if batches.is_empty() {
        Vec::new()
    } else {
        decode_entries(batches)?
    };
    Ok(AppendEntriesRequest {
        vote,
        prev_log_id,
        entries,
        leader_commit,
    })
}

pub fn encode_append_response(response: &AppendEntriesResponse<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    match response {
        AppendEntriesResponse::Success => out.put_u8(0),
        AppendEntriesResponse::PartialSuccess(log_id) => {
            out.put_u8(1);
            put_log_id(&mut out, log_id);
        }
        AppendEntriesResponse::Conflict => out.put_u8(2),
        AppendEntriesResponse::HigherVote(vote) => {
            out.put_u8(3);
            put_vote(&mut out, vote);
        }
    }
    out.freeze()
}

pub fn decode_append_response(body: Bytes) -> Result<AppendEntriesResponse<KRaft>, WireError> {
    let mut r = Reader(body);
    let response = match r.u8()? {
        0 => AppendEntriesResponse::Success,
        1 => AppendEntriesResponse::PartialSuccess(r.log_id()?),
        2 => AppendEntriesResponse::Conflict,
        3 => AppendEntriesResponse::HigherVote(r.vote()?),
        other => {
            return Err(WireError::Malformed(format!(
                "append response kind {other}"
            )))
        }
    };
    r.end()?;
    Ok(response)
}

pub fn encode_vote_request(request: &VoteRequest<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    put_vote(&mut out, &request.vote);
    put_log_id(&mut out, &request.last_log_id);
    out.put_u8(u8::from(request.leadership_transfer));
    out.freeze()
}

pub fn decode_vote_request(body: Bytes) -> Result<VoteRequest<KRaft>, WireError> {
    let mut r = Reader(body);
    let mut request = VoteRequest::new(r.vote()?, r.log_id()?);
    request.leadership_transfer = r.bool()?;
    r.end()?;
    Ok(request)
}

pub fn encode_vote_response(response: &VoteResponse<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    put_vote(&mut out, &response.vote);
    out.put_u8(u8::from(response.vote_granted));
    put_log_id(&mut out, &response.last_log_id);
    out.freeze()
}

pub fn decode_vote_response(body: Bytes) -> Result<VoteResponse<KRaft>, WireError> {
    let mut r = Reader(body);
    let vote = r.vote()?;
    let granted = r.bool()?;
    let last_log_id = r.log_id()?;
    r.end()?;
    Ok(VoteResponse::new(vote, last_log_id, granted))
}

/// A whole snapshot: the leader's vote, its meta (the voters as a VotersRecord) and the
/// checkpoint file's bytes.
pub fn encode_snapshot(vote: &Vote, meta: &SnapshotMeta, data: &Bytes) -> Result<Bytes, WireError> {
    let voters = StaticVoters::from_membership(meta.last_membership.membership())
        .map_err(|e| WireError::Malformed(e.to_string()))?;
    let mut out = BytesMut::new();
    put_vote(&mut out, vote);
    put_log_id(&mut out, &meta.last_log_id);
    put_log_id(&mut out, meta.last_membership.log_id());
    put_bytes(&mut out, &voters_value(&voters)?);
    put_bytes(&mut out, data);
    Ok(out.freeze())
}

pub fn decode_snapshot(body: Bytes) -> Result<(Vote, SnapshotMeta, Bytes), WireError> {
    let mut r = Reader(body);
    let vote = r.vote()?;
    let last_log_id = r.log_id()?;
    let membership_log_id = r.log_id()?;
    let voters = decode_voters(&mut r.bytes()?)?;
    let data = r.bytes()?;
    r.end()?;
    // openraft panics on a snapshot beyond the sender's leadership: refuse it here.
    if last_log_id.is_some_and(|id| id.leader_id.term > vote.leader_id.term)
        || membership_log_id > last_log_id
    {
        return Err(WireError::Malformed(format!(
            "snapshot {last_log_id:?} is not the leader's ({vote})"
        )));
    }
    let meta = SnapshotMeta {
        last_log_id,
        last_membership: StoredMembership::new(membership_log_id, voters.membership()),
    };
    Ok((vote, meta, data))
}

pub fn encode_snapshot_response(response: &SnapshotResponse<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    put_vote(&mut out, &response.vote);
    out.freeze()
}

pub fn decode_snapshot_response(body: Bytes) -> Result<SnapshotResponse<KRaft>, WireError> {
    let mut r = Reader(body);
    let vote = r.vote()?;
    r.end()?;
    Ok(SnapshotResponse::new(vote))
}

pub fn encode_transfer_leader_request(request: &TransferLeaderRequest<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    put_vote(&mut out, request.from_leader());
    out.put_i32(*request.to_node_id());
    put_log_id(&mut out, &request.last_log_id().copied());
    out.freeze()
}

pub fn decode_transfer_leader_request(
    body: Bytes,
) -> Result<TransferLeaderRequest<KRaft>, WireError> {
    let mut r = Reader(body);
    let from = r.vote()?;
    let to = r.i32()?;
    let last_log_id = r.log_id()?;
    r.end()?;
    Ok(TransferLeaderRequest::new(from, to, last_log_id))
}

pub fn encode_transfer_leader_response(response: &TransferLeaderResponse<KRaft>) -> Bytes {
    let mut out = BytesMut::new();
    match response {
        Ok(()) => out.put_u8(0),
        Err(TransferLeaderError::VoteChanged { expected, actual }) => {
            out.put_u8(1);
            put_vote(&mut out, expected);
            put_vote(&mut out, actual);
        }
        Err(TransferLeaderError::LogNotFlushed { expected, actual }) => {
            out.put_u8(2);
            put_log_id(&mut out, expected);
            put_log_id(&mut out, actual);
        }
    }
    out.freeze()
}

pub fn decode_transfer_leader_response(
    body: Bytes,
) -> Result<TransferLeaderResponse<KRaft>, WireError> {
    let mut r = Reader(body);
    let response = match r.u8()? {
        0 => Ok(()),
        1 => Err(TransferLeaderError::VoteChanged {
            expected: r.vote()?,
            actual: r.vote()?,
        }),
        2 => Err(TransferLeaderError::LogNotFlushed {
            expected: r.log_id()?,
            actual: r.log_id()?,
        }),
        other => {
            return Err(WireError::Malformed(format!(
                "transfer response kind {other}"
            )))
        }
    };
    r.end()?;
    Ok(response)
}

#[cfg(test)]
mod tests;
