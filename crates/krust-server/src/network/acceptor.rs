//! One accept loop per listener, enforcing max.connections, max.connections.per.ip (and its
//! overrides) and the connection creation rates (KIP-612).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;

use super::connection::serve_connection;
use crate::clock::now_ms;
use crate::quota::connection_limits::ConnectionThrottle;
use crate::security::session::Session;
use crate::security::tls::TlsListener;
use crate::server_context::ServerContext;
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
                    let wait = admit(&mut connections, stream, session, &listener, &context, &shutdown);
                    // Over max.connection.creation.rate: accept nothing more meanwhile.
                    if !wait.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = shutdown.changed() => break,
                        }
                    }
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

/// Starts serving an accepted connection if the limits allow it; how long the listener then
/// waits before accepting another.
fn admit(
    connections: &mut JoinSet<()>,
    stream: TcpStream,
    session: Session,
    listener: &Listener,
    context: &Arc<ServerContext>,
    shutdown: &watch::Receiver<bool>,
) -> Duration {
    let settings = &context.settings;
    let peer: SocketAddr = session.client_address;
    let Some(slot) = context.connections.try_acquire(peer.ip()) else {
        tracing::info!("refusing connection from {peer}: connection limit reached");
        return Duration::ZERO;
    };
    let mut wait = Duration::ZERO;
    match context.connections.record_connection(peer.ip(), now_ms()) {
        Some(ConnectionThrottle::Ip(ms)) => {
            // As Kafka: the connection is closed once the throttle time is over, so the
            // client does not reconnect at once.
            tracing::debug!("closing connection from {peer} in {ms} ms: connection_creation_rate");
            connections.spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms.unsigned_abs())).await;
                drop((stream, slot));
            });
            return Duration::ZERO;
        }
        Some(ConnectionThrottle::Broker(ms)) => wait = Duration::from_millis(ms.unsigned_abs()),
        None => {}
    }
    let _ = stream.set_nodelay(true);
    if let Err(error) = set_socket_buffers(
        &stream,
        settings.socket_send_buffer_bytes,
        settings.socket_receive_buffer_bytes,
    ) {
        tracing::warn!("cannot size the socket buffers of {peer}: {error}");
    }
    let context = context.clone();
    let shutdown = shutdown.clone();
    let security = listener.security.clone();
    connections.spawn(async move {
        let sasl = security.sasl.as_deref();
        match &security.tls {
            None => serve_connection(stream, session, sasl, context, shutdown).await,
            Some(tls) => {
                if let Some((stream, session)) = handshake(tls, stream, session, &context).await {
                    serve_connection(stream, session, sasl, context, shutdown).await;
                }
            }
        }
        drop(slot);
    });
    wait
}

/// The TLS handshake of an accepted connection and the principal of its client certificate;
/// None (after one log line) when the client is not a TLS client or its certificate is refused.
async fn handshake(
    tls: &TlsListener,
    stream: TcpStream,
    mut session: Session,
    context: &ServerContext,
) -> Option<(TlsStream<TcpStream>, Session)> {
    let peer = session.client_address;
    let idle = Duration::from_millis(context.settings.connections_max_idle_ms);
    let stream = match tokio::time::timeout(idle, tls.acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::info!("closing connection from {peer}: TLS handshake failed: {error}");
            return None;
        }
        Err(_) => {
            tracing::info!("closing connection from {peer}: no TLS handshake within {idle:?}");
            return None;
        }
    };
    match tls.principal(stream.get_ref().1.peer_certificates()) {
        Ok(principal) => session.principal = principal,
        Err(error) => {
            tracing::info!("closing connection from {peer}: {error}");
            return None;
        }
    }
    Some((stream, session))
}

/// socket.send.buffer.bytes and socket.receive.buffer.bytes on an accepted socket, as Kafka's
/// SocketServer sets them; -1 keeps the OS default.
fn set_socket_buffers(
    stream: &tokio::net::TcpStream,
    send_bytes: i32,
    receive_bytes: i32,
) -> rustix::io::Result<()> {
    use rustix::net::sockopt;
    if let Ok(bytes) = usize::try_from(send_bytes) {
        sockopt::set_socket_send_buffer_size(stream, bytes)?;
    }
    if let Ok(bytes) = usize::try_from(receive_bytes) {
        sockopt::set_socket_recv_buffer_size(stream, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rustix::net::sockopt;
    use tokio::net::{TcpListener, TcpStream};

    use super::set_socket_buffers;

    async fn accepted() -> TcpStream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (_client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        accepted.unwrap().0
    }

    #[tokio::test]
    async fn socket_buffer_sizes_are_applied_and_minus_one_keeps_the_os_default() {
        let stream = accepted().await;
        let (send, receive) = (
            sockopt::socket_send_buffer_size(&stream).unwrap(),
            sockopt::socket_recv_buffer_size(&stream).unwrap(),
        );
        set_socket_buffers(&stream, -1, -1).unwrap();
        assert_eq!(sockopt::socket_send_buffer_size(&stream).unwrap(), send);
        assert_eq!(sockopt::socket_recv_buffer_size(&stream).unwrap(), receive);
        for bytes in [16_384, 32_768] {
            set_socket_buffers(&stream, bytes, bytes).unwrap();
            // Linux reports twice the size asked for (its bookkeeping overhead).
            let expected = 2 * bytes as usize;
            assert_eq!(sockopt::socket_send_buffer_size(&stream).unwrap(), expected);
            assert_eq!(sockopt::socket_recv_buffer_size(&stream).unwrap(), expected);
        }
    }
}
