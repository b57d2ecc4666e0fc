//! One connection to a node, once [`crate::handshake`] has opened it: requests. Requests may be pipelined up to `max_in_flight`; a reader task hands each
//! response to the request it answers, in order, after checking its correlation id (Kafka
//! answers a connection's requests in the order they came).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinHandle;

use crate::config::ConnectionConfig;
use crate::error::{ApiName, WireError};
use crate::frame::{self, EncodeError, FrameError};
use crate::security::tls;
use crate::versions::ApiVersionsTable;

/// A byte stream to a node: plain TCP or TLS over it.
pub trait NodeStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> NodeStream for T {}

pub(crate) type Stream = Box<dyn NodeStream>;

/// A request waiting for its response.
struct Waiter {
    correlation_id: i32,
    api: ApiName,
    answer: oneshot::Sender<Result<Bytes, WireError>>,
}

#[derive(Default)]
struct Pending {
    waiters: VecDeque<Waiter>,
    closed: bool,
}

/// What the request side and the reader task share.
struct Shared {
    address: String,
    pending: Mutex<Pending>,
}

impl Shared {
    fn disconnected(&self) -> WireError {
        WireError::Disconnected {
            address: self.address.clone(),
        }
    }

    /// Marks the connection closed: the first waiter learns `why`, the others that the
    /// connection is gone.
    fn close(&self, why: Option<WireError>) {
        let waiters = {
            let mut pending = self.pending.lock().expect("never poisoned");
            pending.closed = true;
            std::mem::take(&mut pending.waiters)
        };
        let mut why = why;
        for waiter in waiters {
            let error = why.take().unwrap_or_else(|| self.disconnected());
            let _ = waiter.answer.send(Err(error));
        }
    }
}

/// The writing side, behind a lock so that correlation ids are given out in the order the
/// requests are written.
struct Writer {
    half: WriteHalf<Stream>,
    next_correlation_id: i32,
}

/// An open connection to one node.
pub struct Connection {
    shared: Arc<Shared>,
    pub(crate) config: Arc<ConnectionConfig>,
    client_id: StrBytes,
    writer: tokio::sync::Mutex<Writer>,
    in_flight: Semaphore,
    reader: JoinHandle<()>,
    pub(crate) versions: Option<ApiVersionsTable>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// A connection over an established `stream` (no TLS, ApiVersions or SASL step).
    pub fn over(address: &str, stream: Stream, config: Arc<ConnectionConfig>) -> Self {
        let (read, write) = tokio::io::split(stream);
        let shared = Arc::new(Shared {
            address: address.to_string(),
            pending: Mutex::default(),
        });
        let reader = tokio::spawn(read_responses(
            read,
            Arc::clone(&shared),
            config.max_response_bytes,
        ));
        Self {
            shared,
            client_id: StrBytes::from_string(config.client_id.clone()),
            in_flight: Semaphore::new(config.max_in_flight.max(1)),
            config,
            writer: tokio::sync::Mutex::new(Writer {
                half: write,
                next_correlation_id: 0,
            }),
            reader,
            versions: None,
        }
    }

    /// The node's `host:port`.
    pub fn address(&self) -> &str {
        &self.shared.address
    }

    /// Whether the connection broke or was closed; a closed connection stays closed.
    pub fn is_closed(&self) -> bool {
        self.shared.pending.lock().expect("never poisoned").closed
    }

    /// The node's ApiVersions, if the config asked for them.
    pub fn api_versions(&self) -> Option<&ApiVersionsTable> {
        self.versions.as_ref()
    }

    /// The highest version of `R` both this client (`ours`, a range within what
    /// kafka-protocol encodes) and the node take; `ours.max` when versions were not
    /// negotiated.
    pub fn version<R: Request>(&self, min: i16, max: i16) -> Result<i16, WireError> {
        match &self.versions {
            None => Ok(max),
            Some(table) => table
                .pick(R::KEY, min, max)
                .ok_or_else(|| WireError::NoCommonVersion {
                    api: ApiName(R::KEY),
                    address: self.address().to_string(),
                    min,
                    max,
                }),
        }
    }

    /// Sends `request` at `version` and waits for its response.
    pub async fn send<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, WireError> {
        let api = ApiName(R::KEY);
        let client_id = self.client_id.clone();
        let mut body = self
            .round_trip(api, |correlation_id| {
                let header = RequestHeader::default()
                    .with_request_api_key(R::KEY)
                    .with_request_api_version(version)
                    .with_correlation_id(correlation_id)
                    .with_client_id(Some(client_id));
                frame::encode_request(&header, request, version)
            })
            .await?;
        let codec = |e: &dyn std::fmt::Display| self.codec_error(api, e);
        ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| codec(&e))?;
        R::Response::decode(&mut body, version).map_err(|e| codec(&e))
    }

    /// Sends a request `body` its caller encoded (an API kafka-protocol does not know, or a
    /// body passed through) at `version` of `api_key`, with this connection's header, and
    /// returns the response body; the API's key says which header versions it uses, as the
    /// caller gives them. Gives up after `timeout`.
    pub async fn send_raw(
        &self,
        api_key: i16,
        version: i16,
        header_versions: (i16, i16),
        body: &[u8],
        timeout: std::time::Duration,
    ) -> Result<Bytes, WireError> {
        let api = ApiName(api_key);
        let client_id = self.client_id.clone();
        let encode = |correlation_id| {
            let header = RequestHeader::default()
                .with_request_api_key(api_key)
                .with_request_api_version(version)
                .with_correlation_id(correlation_id)
                .with_client_id(Some(client_id));
            frame::encode_raw(&header, header_versions.0, body)
        };
        let mut frame = self.round_trip_within(api, timeout, encode).await?;
        ResponseHeader::decode(&mut frame, header_versions.1)
            .map_err(|e| self.codec_error(api, &e))?;
        Ok(frame)
    }

    /// Sends the frame `encode` makes for a correlation id and waits for the response frame
    /// (its header still in it), within the request timeout.
    pub async fn round_trip(
        &self,
        api: ApiName,
        encode: impl FnOnce(i32) -> Result<Bytes, EncodeError>,
    ) -> Result<Bytes, WireError> {
        self.round_trip_within(api, self.config.request_timeout, encode)
            .await
    }

    async fn round_trip_within(
        &self,
        api: ApiName,
        after: std::time::Duration,
        encode: impl FnOnce(i32) -> Result<Bytes, EncodeError>,
    ) -> Result<Bytes, WireError> {
        match tokio::time::timeout(after, self.exchange(api, encode)).await {
            Ok(answered) => answered,
            Err(_) => {
                // The answer may still come: Kafka's clients close the connection rather
                // than let a late response meet a later request.
                self.close();
                Err(WireError::Timeout {
                    api,
                    address: self.address().to_string(),
                    after,
                })
            }
        }
    }

    async fn exchange(
        &self,
        api: ApiName,
        encode: impl FnOnce(i32) -> Result<Bytes, EncodeError>,
    ) -> Result<Bytes, WireError> {
        let _slot = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| self.shared.disconnected())?;
        let answer = {
            let mut writer = self.writer.lock().await;
            let correlation_id = writer.next_correlation_id;
            let frame = encode(correlation_id).map_err(|e| self.codec_error(api, &e))?;
            let (answer, receiver) = oneshot::channel();
            {
                let mut pending = self.shared.pending.lock().expect("never poisoned");
                if pending.closed {
                    return Err(self.shared.disconnected());
                }
                pending.waiters.push_back(Waiter {
                    correlation_id,
                    api,
                    answer,
                });
            }
            writer.next_correlation_id = correlation_id.wrapping_add(1);
            if let Err(source) = writer.half.write_all(&frame).await {
                let error = self.io_error(source);
                self.close();
                return Err(error);
            }
            receiver
        };
        answer.await.map_err(|_| self.shared.disconnected())?
    }

    /// Closes the connection; requests waiting on it fail.
    pub fn close(&self) {
        self.reader.abort();
        self.shared.close(None);
    }

    fn io_error(&self, source: io::Error) -> WireError {
        io_error(&self.shared.address, source)
    }

    fn codec_error(&self, api: ApiName, error: &dyn std::fmt::Display) -> WireError {
        WireError::Codec {
            api,
            address: self.address().to_string(),
            reason: error.to_string(),
        }
    }
}

fn io_error(address: &str, source: io::Error) -> WireError {
    if tls::tls_cause(&source).is_some() {
        return WireError::Tls {
            address: address.to_string(),
            reason: tls::tls_reason(&source),
        };
    }
    WireError::Io {
        address: address.to_string(),
        source,
    }
}

/// The reader task: hands each response frame to the oldest waiter, until the connection
/// breaks or answers out of order.
async fn read_responses(mut read: ReadHalf<Stream>, shared: Arc<Shared>, limit: usize) {
    loop {
        let frame = match frame::read_frame(&mut read, limit).await {
            Ok(frame) => frame,
            Err(FrameError::TooLarge { size, limit }) => {
                return shared.close(Some(WireError::ResponseTooLarge {
                    address: shared.address.clone(),
                    size,
                    limit,
                }))
            }
            Err(FrameError::Io(source)) => {
                return shared.close(Some(io_error(&shared.address, source)))
            }
        };
        let waiter = shared
            .pending
            .lock()
            .expect("never poisoned")
            .waiters
            .pop_front();
        let Some(waiter) = waiter else {
            // A response nobody asked for: the stream can no longer be trusted.
            return shared.close(None);
        };
        let got = frame::correlation_id(&frame).unwrap_or(-1);
        if got != waiter.correlation_id {
            let _ = waiter.answer.send(Err(WireError::CorrelationMismatch {
                api: waiter.api,
                address: shared.address.clone(),
                expected: waiter.correlation_id,
                got,
            }));
            return shared.close(None);
        }
        // The requester may have given up (dropped its future); the order stays right.
        let _ = waiter.answer.send(Ok(frame));
    }
}
