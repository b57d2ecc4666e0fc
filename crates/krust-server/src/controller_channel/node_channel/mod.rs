//! Requests from this node to another node: to the active controller (Kafka's
//! NodeToControllerChannelManager: broker registration and heartbeats, AlterPartition,
//! forwarded admin requests) and to other brokers (transaction markers, KIP-890 verification).
//!
//! A channel is one thread holding one connection (PLAINTEXT) and sending one request at a
//! time, so a channel never waits behind another: the broker keeps one per kind of traffic and
//! destination, as Kafka does. Its [`ChannelTarget`] says which node to send to and where it
//! listens: the [`ControllerLocator`] names the active controller, and a request waits for one
//! to be known. A broken connection is re-made to whichever node the target names then, until
//! the request's deadline.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// Kafka's `controller.socket.timeout.ms` default: how long a request may take in all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Kafka's `reconnect.backoff.ms` default.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(50);
/// The largest response accepted (a forwarded DescribeConfigs of many topics stays far below).
const MAX_RESPONSE_BYTES: usize = 100 << 20;

/// Why a request to the controller failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0}")]
    NoTarget(String),
    #[error("the request to node {node} ({address}) failed: {reason}")]
    Failed {
        node: i32,
        address: String,
        reason: String,
    },
    #[error("the controller channel has stopped")]
    Stopped,
}

/// A node to send to, as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    pub id: i32,
    pub address: String,
}

/// Which node is the active controller, from the quorum's leader and the voters' addresses
/// (`controller.quorum.voters`).
#[derive(Debug, Default)]
pub struct ControllerLocator {
    voters: BTreeMap<i32, String>,
    active: Mutex<Option<TargetNode>>,
    changed: Condvar,
}

impl ControllerLocator {
    pub fn new(voters: impl IntoIterator<Item = (i32, String)>) -> Self {
        Self {
            voters: voters.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The quorum's leader is `leader` (-1 or an unknown id: none known).
    pub fn set_leader(&self, leader: i32) {
        let node = self.voters.get(&leader).map(|address| TargetNode {
            id: leader,
            address: address.clone(),
        });
        *self.active.lock() = node;
        self.changed.notify_all();
    }

    pub fn active(&self) -> Option<TargetNode> {
        self.active.lock().clone()
    }
}

/// `host:port`, with an IPv6 host in brackets.
pub fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Where a channel sends its requests.
pub trait ChannelTarget: Send + Sync + 'static {
    /// The node to send to, waiting until `deadline` for one to be known; the error says why
    /// there is none.
    fn wait_node(&self, deadline: Instant) -> Result<TargetNode, String>;
}

impl ChannelTarget for ControllerLocator {
    fn wait_node(&self, deadline: Instant) -> Result<TargetNode, String> {
        let mut active = self.active.lock();
        while active.is_none() {
            if self.changed.wait_until(&mut active, deadline).timed_out() {
                break;
            }
        }
        active
            .clone()
            .ok_or_else(|| "no active controller was known in time".to_string())
    }
}

struct Job {
    api_key: ApiKey,
    version: i16,
    body: Bytes,
    reply: oneshot::Sender<Result<Bytes, ChannelError>>,
}

/// A channel to the active controller; cloning shares it.
#[derive(Clone)]
pub struct NodeChannel {
    jobs: mpsc::Sender<Job>,
}

impl NodeChannel {
    /// Starts the channel's thread; `name` names it and the client id
    /// (`krust-node-<id>-<name>`). A request gives up after `timeout` (Kafka's
    /// `controller.socket.timeout.ms`, [`REQUEST_TIMEOUT`]).
    pub fn start(
        name: &str,
        node_id: i32,
        target: Arc<dyn ChannelTarget>,
        timeout: Duration,
    ) -> std::io::Result<Self> {
        let (jobs, receiver) = mpsc::channel::<Job>();
        let mut worker = Worker {
            target,
            client_id: StrBytes::from_string(format!("krust-node-{node_id}-{name}")),
            connection: None,
            next_correlation_id: 0,
            timeout,
        };
        thread::Builder::new()
            .name(format!("krust-channel-{name}"))
            .spawn(move || {
                for job in receiver {
                    let result = worker.send(job.api_key, job.version, &job.body);
                    // The caller may have given up; nothing to tell then.
                    let _ = job.reply.send(result);
                }
            })?;
        Ok(Self { jobs })
    }

    /// Sends a request body (without header) and returns the response body (without
    /// header). The caller encodes and decodes the api's own messages.
    pub async fn send(
        &self,
        api_key: ApiKey,
        version: i16,
        body: Bytes,
    ) -> Result<Bytes, ChannelError> {
        let answer = self.submit(api_key, version, body)?;
        answer.await.map_err(|_| ChannelError::Stopped)?
    }

    /// `send` for a thread outside the async runtime (Python's calls).
    pub fn send_blocking(
        &self,
        api_key: ApiKey,
        version: i16,
        body: Bytes,
    ) -> Result<Bytes, ChannelError> {
        let answer = self.submit(api_key, version, body)?;
        answer.blocking_recv().map_err(|_| ChannelError::Stopped)?
    }

    fn submit(
        &self,
        api_key: ApiKey,
        version: i16,
        body: Bytes,
    ) -> Result<oneshot::Receiver<Result<Bytes, ChannelError>>, ChannelError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            api_key,
            version,
            body,
            reply,
        };
        self.jobs.send(job).map_err(|_| ChannelError::Stopped)?;
        Ok(answer)
    }
}

struct Worker {
    target: Arc<dyn ChannelTarget>,
    client_id: StrBytes,
    connection: Option<(TargetNode, TcpStream)>,
    next_correlation_id: i32,
    timeout: Duration,
}

impl Worker {
    /// Sends until answered or the timeout has passed; a broken connection is made again,
    /// to the node the target names by then.
    fn send(&mut self, api_key: ApiKey, version: i16, body: &[u8]) -> Result<Bytes, ChannelError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let node = self
                .target
                .wait_node(deadline)
                .map_err(ChannelError::NoTarget)?;
            match self.exchange(&node, api_key, version, body, deadline) {
                Ok(response) => return Ok(response),
                Err(reason) => {
                    self.connection = None;
                    if Instant::now() + RECONNECT_BACKOFF >= deadline {
                        return Err(ChannelError::Failed {
                            node: node.id,
                            address: node.address,
                            reason,
                        });
                    }
                    thread::sleep(RECONNECT_BACKOFF);
                }
            }
        }
    }

    fn exchange(
        &mut self,
        node: &TargetNode,
        api_key: ApiKey,
        version: i16,
        body: &[u8],
        deadline: Instant,
    ) -> Result<Bytes, String> {
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let stream = match &mut self.connection {
            Some((connected, stream)) if connected == node => stream,
            _ => {
                let stream = connect(&node.address, timeout)?;
                &mut self.connection.insert((node.clone(), stream)).1
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| e.to_string())?;
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = request_frame(api_key, version, correlation_id, &self.client_id, body)?;
        stream.write_all(&frame).map_err(|e| e.to_string())?;
        let mut response = read_frame(stream)?;
        let header =
            ResponseHeader::decode(&mut response, api_key.response_header_version(version))
                .map_err(|e| format!("malformed response header: {e}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "response correlation id {} does not match {correlation_id}",
                header.correlation_id
            ));
        }
        Ok(response)
    }
}

fn connect(address: &str, timeout: Duration) -> Result<TcpStream, String> {
    let mut last = format!("{address} resolves to nothing");
    for resolved in address.to_socket_addrs().map_err(|e| e.to_string())? {
        match TcpStream::connect_timeout(&resolved, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                return Ok(stream);
            }
            Err(error) => last = error.to_string(),
        }
    }
    Err(last)
}

/// A size-prefixed request frame: header (with this channel's client id) and body.
pub fn request_frame(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body: &[u8],
) -> Result<BytesMut, String> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let mut frame = BytesMut::with_capacity(64 + body.len());
    frame.extend_from_slice(&[0; 4]);
    header
        .encode(&mut frame, api_key.request_header_version(version))
        .map_err(|e| format!("cannot encode the request header: {e}"))?;
    frame.extend_from_slice(body);
    let size = i32::try_from(frame.len() - 4).map_err(|_| "request too large".to_string())?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}

fn read_frame(stream: &mut TcpStream) -> Result<Bytes, String> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(|e| e.to_string())?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .map_err(|_| "negative response size".to_string())?;
    if size > MAX_RESPONSE_BYTES {
        return Err(format!(
            "response of {size} bytes is over {MAX_RESPONSE_BYTES}"
        ));
    }
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).map_err(|e| e.to_string())?;
    Ok(Bytes::from(body))
}

#[cfg(test)]
mod tests;
