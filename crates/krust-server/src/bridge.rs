//! The one path by which requests the core does not own reach Python (see docs/bridge.md).
//!
//! The core sends a [`BridgeRequest`] down a channel; a dedicated Python thread (owned by the
//! bindings crate) receives it, hands it to the Python dispatcher and later answers through the
//! request's oneshot. Tokio tasks only ever await that oneshot; they never touch the GIL.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Request, StrBytes};
use tokio::sync::{mpsc, oneshot};

use crate::request::routing::PythonApi;
use crate::security::session::Session;

/// Client id of requests the core itself sends to the controller; for logs only: what marks
/// them as the core's is their session's internal flag, which no client can set.
pub const INTERNAL_CLIENT_ID: &str = "krust-internal";

/// How Python answered a request.
#[derive(Debug)]
pub enum BridgeReply {
    /// The encoded response body, without the response header, and the throttle time it
    /// carries (request_percentage charged for Python's handling time; 0: none).
    Response { body: Bytes, throttle_ms: i64 },
    /// No answer: close the client's connection (Kafka's reaction to a request it cannot parse).
    CloseConnection,
}

/// One request crossing to Python, with the channel its answer goes back on.
#[derive(Debug)]
pub struct BridgeRequest {
    pub call: BridgeCall,
    pub reply: oneshot::Sender<BridgeReply>,
}

/// Why a bridged call produced no response.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the Python side is not running")]
    Unavailable,
    #[error("the Python side closed the request without an answer")]
    Closed,
    #[error("cannot encode or decode an internal request: {0}")]
    Codec(String),
}

/// The sending half, shared by every connection; knows which api keys Python owns.
#[derive(Clone)]
pub struct Bridge {
    sender: mpsc::UnboundedSender<BridgeRequest>,
    python_apis: BTreeMap<i16, PythonApi>,
}

/// The receiving half, driven by the bindings crate's Python thread.
pub struct BridgeReceiver {
    receiver: mpsc::UnboundedReceiver<BridgeRequest>,
}

impl BridgeReceiver {
    /// Blocks the calling (non-tokio) thread until the next request, or `None` once every
    /// sender is gone.
    pub fn recv_blocking(&mut self) -> Option<BridgeRequest> {
        self.receiver.blocking_recv()
    }
}

impl Bridge {
    /// A bridge for the given Python-owned api keys, their versions and who may call them.
    pub fn new(python_apis: BTreeMap<i16, PythonApi>) -> (Bridge, BridgeReceiver) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (
            Bridge {
                sender,
                python_apis,
            },
            BridgeReceiver { receiver },
        )
    }

    /// The api keys Python owns, their versions and who may call them.
    pub fn python_apis(&self) -> &BTreeMap<i16, PythonApi> {
        &self.python_apis
    }

    /// Sends a request to Python and waits for its reply.
    pub async fn call(&self, request: BridgeCall) -> Result<BridgeReply, BridgeError> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(BridgeRequest {
                call: request,
                reply,
            })
            .map_err(|_| BridgeError::Unavailable)?;
        answer.await.map_err(|_| BridgeError::Closed)
    }

    /// Sends a request the core itself makes (e.g. auto-creating a topic) through the same path,
    /// encoded like a client's but in the internal session, and decodes the response.
    pub async fn call_internal<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, BridgeError> {
        self.call_internal_in(Session::internal(), request, version)
            .await
    }

    /// Like `call_internal`, in `session`: an internal session made for one connection (the
    /// SASL/PLAIN credential check asks Python on behalf of a client connection).
    pub async fn call_internal_in<R: Request>(
        &self,
        session: Session,
        request: &R,
        version: i16,
    ) -> Result<R::Response, BridgeError> {
        let mut body = BytesMut::new();
        request
            .encode(&mut body, version)
            .map_err(|e| BridgeError::Codec(e.to_string()))?;
        let reply = self
            .call(BridgeCall {
                api_key: R::KEY,
                api_version: version,
                correlation_id: 0,
                client_id: Some(INTERNAL_CLIENT_ID.to_string()),
                session,
                body: body.freeze(),
            })
            .await?;
        match reply {
            BridgeReply::Response {
                body: mut bytes, ..
            } => R::Response::decode(&mut bytes, version)
                .map_err(|e| BridgeError::Codec(e.to_string())),
            BridgeReply::CloseConnection => Err(BridgeError::Closed),
        }
    }
}

/// A request to send through the bridge (the reply channel is made by [`Bridge::call`]).
#[derive(Debug)]
pub struct BridgeCall {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub session: Session,
    pub body: Bytes,
}

impl BridgeCall {
    /// A call carrying a client's request whose header was already parsed.
    pub fn from_client(header: &RequestHeader, session: &Session, body: Bytes) -> BridgeCall {
        BridgeCall {
            api_key: header.request_api_key,
            api_version: header.request_api_version,
            correlation_id: header.correlation_id,
            client_id: header.client_id.as_ref().map(StrBytes::to_string),
            session: session.clone(),
            body,
        }
    }
}
