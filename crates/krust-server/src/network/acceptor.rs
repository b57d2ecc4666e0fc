//! One accept loop per listener, enforcing max.connections and max.connections.per.ip.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::connection::serve_connection;
use crate::server::ServerContext;

/// Counts open connections per client address and in total.
#[derive(Default)]
pub struct ConnectionCounter {
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// Releases its connection slot when the connection ends.
pub struct ConnectionSlot {
    counter: Arc<ConnectionCounter>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut per_ip = self.counter.per_ip.lock();
        if let Some(count) = per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionCounter {
    /// Takes a slot for a connection from `ip`, or `None` if a limit is reached.
    pub fn try_acquire(
        self: &Arc<Self>,
        ip: IpAddr,
        max_per_ip: usize,
        max_total: usize,
    ) -> Option<ConnectionSlot> {
        let mut per_ip = self.per_ip.lock();
        let total: usize = per_ip.values().sum();
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= max_per_ip || total >= max_total {
            return None;
        }
        per_ip.insert(ip, from_ip + 1);
        Some(ConnectionSlot {
            counter: self.clone(),
            ip,
        })
    }
}

/// Accepts connections until `shutdown` turns true, then waits for open connections to finish
/// their in-flight request.
pub async fn run_listener(
    listener: TcpListener,
    context: Arc<ServerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => admit(&mut connections, stream, peer, &context, &shutdown),
                Err(error) => tracing::warn!("accept failed: {error}"),
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

fn admit(
    connections: &mut JoinSet<()>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    context: &Arc<ServerContext>,
    shutdown: &watch::Receiver<bool>,
) {
    let settings = &context.settings;
    let Some(slot) = context.connections.try_acquire(
        peer.ip(),
        settings.max_connections_per_ip,
        settings.max_connections,
    ) else {
        tracing::info!("refusing connection from {peer}: connection limit reached");
        return;
    };
    let _ = stream.set_nodelay(true);
    let context = context.clone();
    let shutdown = shutdown.clone();
    connections.spawn(async move {
        serve_connection(stream, peer, context, shutdown).await;
        drop(slot);
    });
}
