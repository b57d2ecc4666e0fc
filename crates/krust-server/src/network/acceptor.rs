//! One accept loop per listener, enforcing max.connections and max.connections.per.ip.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::connection::serve_connection;
use crate::server_context::ServerContext;
use crate::session::Session;
use crate::settings::Listener;

/// Accepts connections until `shutdown` turns true, then waits for open connections to finish
/// their in-flight request.
pub async fn run_listener(
    socket: TcpListener,
    listener: Listener,
    context: Arc<ServerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => {
                    let session = Session::client(&listener.name, listener.security_protocol, peer);
                    admit(&mut connections, stream, session, &context, &shutdown);
                }
                Err(error) => tracing::warn!("accept failed: {error}"),
            },
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(socket);
    while connections.join_next().await.is_some() {}
}

fn admit(
    connections: &mut JoinSet<()>,
    stream: tokio::net::TcpStream,
    session: Session,
    context: &Arc<ServerContext>,
    shutdown: &watch::Receiver<bool>,
) {
    let settings = &context.settings;
    let peer: SocketAddr = session.client_address;
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
        serve_connection(stream, session, context, shutdown).await;
        drop(slot);
    });
}
