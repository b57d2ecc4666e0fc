//! The quorum's transport: each RPC is one Kafka-framed request on a connection to the
//! peer's controller listener (host:port from controller.quorum.voters; krust-wire's
//! connection on the sending side), and `serve` answers one on the receiving side. A failed connection is dropped and made again on the next RPC;
//! openraft backs off from an unreachable peer (`Config::backoff`).
//!
//! Every request carries the sender's voters and a receiver with other voters refuses it with
//! INCONSISTENT_VOTER_SET before its Raft sees it, so a node started with another
//! `controller.quorum.voters` cannot start elections among the others; both sides log why.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use krust_wire::{Connection, ConnectionConfig, WireError as ConnectionError};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetworkFactory, RaftNetworkV2};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::voters::StaticVoters;
use crate::wire::{self, WireError, MAX_FRAME_BYTES};
use crate::{KRaft, NodeId, Raft, Vote};

/// The request header version of quorum RPCs (no tagged fields).
const REQUEST_HEADER_VERSION: i16 = 1;

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("malformed request header: {0}")]
    Header(String),
    #[error("the request's voters are {0}, not controller.quorum.voters")]
    OtherVoters(String),
    #[error("raft: {0}")]
    Raft(String),
}

/// A request frame (size prefix included).
pub fn request_frame(api_key: i16, correlation_id: i32, client_id: &str, body: &[u8]) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(wire::VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut out = BytesMut::new();
    out.put_i32(0);
    header
        .encode(&mut out, REQUEST_HEADER_VERSION)
        .expect("a request header always encodes");
    out.put_slice(body);
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    out.freeze()
}

/// A request frame's (api key, version, correlation id, body); `frame` has no size prefix.
pub fn parse_request(mut frame: Bytes) -> Result<(i16, i16, i32, Bytes), RpcError> {
    let header = RequestHeader::decode(&mut frame, REQUEST_HEADER_VERSION)
        .map_err(|e| RpcError::Header(e.to_string()))?;
    Ok((
        header.request_api_key,
        header.request_api_version,
        header.correlation_id,
        frame,
    ))
}

/// A response frame (size prefix, correlation id, body).
pub fn response_frame(correlation_id: i32, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + body.len());
    out.put_i32(4 + body.len() as i32);
    out.put_i32(correlation_id);
    out.put_slice(body);
    out.freeze()
}

/// Reads one size-prefixed frame of at most MAX_FRAME_BYTES.
pub async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> io::Result<Bytes> {
    let size = stream.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_FRAME_BYTES)
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("frame of {size} bytes"))
        })?;
    let mut frame = vec![0; size];
    stream.read_exact(&mut frame).await?;
    Ok(Bytes::from(frame))
}

/// Answers one quorum request (`api_key`, `body`) with this node's Raft; the response body.
/// A version 1 request from a sender with other voters is refused (INCONSISTENT_VOTER_SET).
pub async fn serve(
    raft: &Raft,
    voters: &StaticVoters,
    api_key: i16,
    version: i16,
    body: Bytes,
) -> Result<Bytes, RpcError> {
    match version {
        0 => serve_body(raft, voters, api_key, body).await,
        wire::VERSION => {
            let (sent, body) = wire::decode_request(body)?;
            if &sent != voters {
                log_refused_sender(&sent, voters);
                return Ok(wire::encode_inconsistent_voter_set(voters)?);
            }
            let response = serve_body(raft, voters, api_key, body).await?;
            Ok(wire::encode_response(&response))
        }
        _ => Err(WireError::UnsupportedVersion(api_key, version).into()),
    }
}

/// Warns once per voter set refused in a row: the sender retries every election timeout.
fn log_refused_sender(sent: &StaticVoters, voters: &StaticVoters) {
    static LAST_REFUSED: parking_lot::Mutex<Option<String>> = parking_lot::Mutex::new(None);
    let sent = sent.to_string();
    let mut last = LAST_REFUSED.lock();
    if last.as_deref() != Some(sent.as_str()) {
        tracing::warn!(
            "refused a controller quorum request with INCONSISTENT_VOTER_SET: the sender's \
             controller.quorum.voters is {sent}, this node's is {voters}"
        );
        *last = Some(sent);
    }
}

/// A request body as version 0 frames it; its response body likewise.
async fn serve_body(
    raft: &Raft,
    voters: &StaticVoters,
    api_key: i16,
    body: Bytes,
) -> Result<Bytes, RpcError> {
    let raft_error = |e: &dyn std::fmt::Display| RpcError::Raft(e.to_string());
    match api_key {
        wire::APPEND_ENTRIES => {
            let request = wire::decode_append_request(body)?;
            let response = raft
                .append_entries(request)
                .await
                .map_err(|e| raft_error(&e))?;
            Ok(wire::encode_append_response(&response))
        }
        wire::VOTE | wire::PRE_VOTE => {
            let request = wire::decode_vote_request(body)?;
            let response = if api_key == wire::VOTE {
                raft.vote(request).await
            } else {
                raft.pre_vote(request).await
            };
            Ok(wire::encode_vote_response(
                &response.map_err(|e| raft_error(&e))?,
            ))
        }
        wire::FULL_SNAPSHOT => {
            let (vote, meta, data) = wire::decode_snapshot(body)?;
            let sent = StaticVoters::from_membership(meta.last_membership.membership())
                .map_err(|e| RpcError::OtherVoters(e.to_string()))?;
            if &sent != voters {
                return Err(RpcError::OtherVoters(sent.to_string()));
            }
            let snapshot = openraft::Snapshot {
                meta,
                snapshot: data,
            };
            let response = raft
                .install_full_snapshot(vote, snapshot)
                .await
                .map_err(|e| raft_error(&e))?;
            Ok(wire::encode_snapshot_response(&response))
        }
        wire::TRANSFER_LEADER => {
            let request = wire::decode_transfer_leader_request(body)?;
            let response = raft
                .handle_transfer_leader(request)
                .await
                .map_err(|e| raft_error(&e))?;
            Ok(wire::encode_transfer_leader_response(&response))
        }
        other => Err(WireError::UnknownApi(other).into()),
    }
}

/// Makes the clients openraft sends RPCs through.
#[derive(Clone)]
pub struct TcpNetwork {
    node_id: NodeId,
    voters: StaticVoters,
}

impl TcpNetwork {
    pub fn new(node_id: NodeId, voters: StaticVoters) -> Self {
        Self { node_id, voters }
    }
}

impl RaftNetworkFactory<KRaft> for TcpNetwork {
    type Network = TcpClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> TcpClient {
        TcpClient {
            target,
            address: node.addr.clone(),
            client_id: format!("krust-raft-{}", self.node_id),
            voters: self.voters.clone(),
            connection: None,
            refused_with: None,
        }
    }
}

/// One peer's connection, made when needed.
pub struct TcpClient {
    target: NodeId,
    address: String,
    client_id: String,
    voters: StaticVoters,
    connection: Option<Connection>,
    /// The voters the peer last refused this node's with, logged once until it accepts.
    refused_with: Option<StaticVoters>,
}

/// Why an RPC got no answer to hand to openraft.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    #[error("the request to {address} got no answer within {} ms", ttl.as_millis())]
    TimedOut { address: String, ttl: Duration },
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("node {target} refused with INCONSISTENT_VOTER_SET: its voters are {theirs}")]
    InconsistentVoterSet { target: NodeId, theirs: String },
}

impl CallError {
    /// A peer that cannot be reached or refuses this node is unreachable to openraft, which
    /// backs off from it; a garbled answer is a network error.
    fn into_rpc_error(self) -> RPCError<KRaft> {
        match self {
            Self::Wire(error) => malformed(&error),
            other => RPCError::Unreachable(Unreachable::new(&other)),
        }
    }
}

fn malformed(error: &WireError) -> RPCError<KRaft> {
    RPCError::Network(NetworkError::new(error))
}

impl TcpClient {
    /// Sends one request (with this node's voters) and reads its response body within `ttl`.
    async fn call(&mut self, api_key: i16, body: &[u8], ttl: Duration) -> Result<Bytes, CallError> {
        let request = wire::encode_request(&self.voters, body)?;
        let result = tokio::time::timeout(ttl, self.exchange(api_key, &request, ttl)).await;
        let result = result.unwrap_or_else(|_| {
            Err(CallError::TimedOut {
                address: self.address.clone(),
                ttl,
            })
        });
        if result.is_err() {
            self.connection = None;
        }
        match wire::decode_response(result?)? {
            wire::Answer::Body(body) => {
                self.refused_with = None;
                Ok(body)
            }
            wire::Answer::InconsistentVoterSet(theirs) => Err(self.refused(theirs)),
        }
    }

    /// The error for a peer whose voters differ, logged the first time in a row.
    fn refused(&mut self, theirs: StaticVoters) -> CallError {
        if self.refused_with.as_ref() != Some(&theirs) {
            tracing::error!(
                "controller quorum: node {} at {} refused this node with INCONSISTENT_VOTER_SET: \
                 its controller.quorum.voters is {theirs} but this node's is {}; every voter \
                 needs the same controller.quorum.voters",
                self.target,
                self.address,
                self.voters
            );
            self.refused_with = Some(theirs.clone());
        }
        CallError::InconsistentVoterSet {
            target: self.target,
            theirs: theirs.to_string(),
        }
    }

    /// One request on the peer's connection, made first if there is none or it broke.
    async fn exchange(
        &mut self,
        api_key: i16,
        body: &[u8],
        ttl: Duration,
    ) -> Result<Bytes, CallError> {
        let connection = match self.connection.take() {
            Some(connection) if !connection.is_closed() => connection,
            _ => {
                let mut config =
                    ConnectionConfig::new(self.client_id.clone()).with_request_timeout(ttl);
                config.max_response_bytes = MAX_FRAME_BYTES;
                Connection::connect(&self.address, Arc::new(config)).await?
            }
        };
        // Quorum responses have the v0 header: the correlation id alone.
        let versions = (REQUEST_HEADER_VERSION, 0);
        let answered = connection
            .send_raw(api_key, wire::VERSION, versions, body, ttl)
            .await;
        self.connection = Some(connection);
        Ok(answered?)
    }

    async fn rpc<T>(
        &mut self,
        api_key: i16,
        body: Bytes,
        option: &RPCOption,
        decode: impl FnOnce(Bytes) -> Result<T, WireError>,
    ) -> Result<T, RPCError<KRaft>> {
        let response = self
            .call(api_key, &body, option.hard_ttl())
            .await
            .map_err(|e| e.into_rpc_error())?;
        decode(response).map_err(|e| malformed(&e))
    }
}

impl RaftNetworkV2<KRaft> for TcpClient {
    type SnapshotData = Bytes;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<KRaft>, RPCError<KRaft>> {
        let body = wire::encode_append_request(&rpc, &self.voters).map_err(|e| malformed(&e))?;
        self.rpc(
            wire::APPEND_ENTRIES,
            body,
            &option,
            wire::decode_append_response,
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<KRaft>, RPCError<KRaft>> {
        let body = wire::encode_vote_request(&rpc);
        self.rpc(wire::VOTE, body, &option, wire::decode_vote_response)
            .await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<KRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<KRaft>, RPCError<KRaft>> {
        let body = wire::encode_vote_request(&rpc);
        self.rpc(wire::PRE_VOTE, body, &option, wire::decode_vote_response)
            .await
    }

    async fn transfer_leader(
        &mut self,
        request: TransferLeaderRequest<KRaft>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<KRaft>, RPCError<KRaft>> {
        let body = wire::encode_transfer_leader_request(&request);
        self.rpc(
            wire::TRANSFER_LEADER,
            body,
            &option,
            wire::decode_transfer_leader_response,
        )
        .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::Snapshot<crate::LogIdCommitted, NodeId, BasicNode, Bytes>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<KRaft>, StreamingError<KRaft>> {
        let body = wire::encode_snapshot(&vote, &snapshot.meta, &snapshot.snapshot)
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        let call = self.call(wire::FULL_SNAPSHOT, &body, option.hard_ttl());
        let response = tokio::select! {
            closed = cancel => return Err(StreamingError::Closed(closed)),
            response = call => response,
        };
        let response = response.map_err(|e| match e {
            CallError::Wire(error) => StreamingError::Network(NetworkError::new(&error)),
            other => StreamingError::Unreachable(Unreachable::new(&other)),
        })?;
        wire::decode_snapshot_response(response)
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))
    }
}
