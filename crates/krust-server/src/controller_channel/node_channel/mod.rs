//! Requests from this node to another node: to the active controller (Kafka's
//! NodeToControllerChannelManager: broker registration and heartbeats, AlterPartition,
//! forwarded admin requests) and to other brokers (transaction markers, KIP-890 verification).
//!
//! A channel is one thread holding one connection (krust-wire's blocking connection,
//! PLAINTEXT) and sending one request at a time, so a channel never waits behind another: the broker keeps one per kind of traffic and
//! destination, as Kafka does. Its [`ChannelTarget`] says which node to send to and where it
//! listens: the [`ControllerLocator`] names the active controller, and a request waits for one
//! to be known. A broken connection is re-made to whichever node the target names then, until
//! the request's deadline.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use krust_wire::{Backoff, BlockingConnection, ConnectionConfig, WireError};
use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// Kafka's `controller.socket.timeout.ms` default: how long a request may take in all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
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
        reason: WireError,
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
            client_id: format!("krust-node-{node_id}-{name}"),
            connection: None,
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
    client_id: String,
    connection: Option<(TargetNode, BlockingConnection)>,
    timeout: Duration,
}

impl Worker {
    /// Sends until answered or the timeout has passed; a broken connection is made again,
    /// to the node the target names by then.
    fn send(&mut self, api_key: ApiKey, version: i16, body: &[u8]) -> Result<Bytes, ChannelError> {
        let deadline = Instant::now() + self.timeout;
        // Failures in a row at one node: Kafka's reconnect.backoff.ms doubling up to
        // reconnect.backoff.max.ms; a node the target names anew is tried at once.
        let mut failures: Option<(i32, u32)> = None;
        loop {
            let node = self
                .target
                .wait_node(deadline)
                .map_err(ChannelError::NoTarget)?;
            match self.exchange(&node, api_key, version, body, deadline) {
                Ok(response) => return Ok(response),
                Err(reason) => {
                    self.connection = None;
                    let in_a_row = match failures {
                        Some((id, count)) if id == node.id => count + 1,
                        _ => 1,
                    };
                    failures = Some((node.id, in_a_row));
                    let pause = Backoff::default().delay(in_a_row);
                    if Instant::now() + pause >= deadline {
                        return Err(ChannelError::Failed {
                            node: node.id,
                            address: node.address,
                            reason,
                        });
                    }
                    thread::sleep(pause);
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
    ) -> Result<Bytes, WireError> {
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let connection = match &mut self.connection {
            Some((connected, connection)) if connected == node && !connection.is_closed() => {
                connection
            }
            _ => {
                let mut config =
                    ConnectionConfig::new(self.client_id.clone()).with_request_timeout(timeout);
                config.max_response_bytes = MAX_RESPONSE_BYTES;
                let connection = BlockingConnection::connect(&node.address, Arc::new(config))?;
                &mut self.connection.insert((node.clone(), connection)).1
            }
        };
        let header_versions = (
            api_key.request_header_version(version),
            api_key.response_header_version(version),
        );
        connection.send_raw(api_key as i16, version, header_versions, body, timeout)
    }
}

#[cfg(test)]
mod tests;
