//! One client connection: size-prefixed frames in, responses out, strictly in request order.
//!
//! Like Kafka, a connection's next request is read only after the previous one is answered,
//! so responses are in request order and a client may pipeline freely (its requests wait in the
//! socket buffer). `queued.max.requests` bounds the requests being handled broker-wide: when
//! all slots are taken, connections stop reading (back-pressure), nothing is dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::dispatch::{handle_request, Outcome};
use crate::network::send_frame::write_frame;
use crate::server::ServerContext;

/// Serves one connection until the client closes it, it idles out, it misbehaves, or the
/// broker shuts down (after answering the request in flight).
pub async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let idle = Duration::from_millis(context.settings.connections_max_idle_ms);
    let max_request = context.settings.socket_request_max_bytes;
    let client_host = peer.ip().to_string();
    loop {
        let size = tokio::select! {
            size = tokio::time::timeout(idle, stream.read_i32()) => match size {
                Ok(Ok(size)) => size,
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::debug!("closing idle connection from {peer}");
                    return;
                }
            },
            _ = shutdown.changed() => return,
        };
        if size < 0 || size as usize > max_request {
            tracing::warn!(
                "closing connection from {peer}: request size {size} exceeds socket.request.max.bytes ({max_request})"
            );
            return;
        }
        let Ok(_slot) = context.request_slots.acquire().await else {
            return;
        };
        // Read into spare capacity: zeroing a buffer the socket overwrites costs a pass over
        // every produced byte.
        let mut frame = BytesMut::with_capacity(size as usize);
        let mut body = (&mut stream).take(size as u64);
        while frame.len() < size as usize {
            match body.read_buf(&mut frame).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        match handle_request(&context, frame.freeze(), &client_host).await {
            Outcome::Respond(response) => {
                if let Err(error) = write_frame(&mut stream, &response).await {
                    tracing::debug!("closing connection from {peer}: {error}");
                    return;
                }
            }
            Outcome::NoResponse => {}
            Outcome::Close(reason) => {
                tracing::warn!("closing connection from {peer}: {reason}");
                return;
            }
        }
    }
}
