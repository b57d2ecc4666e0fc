//! An in-process fake Kafka node for krust-wire's tests: a tokio listener whose answers a
//! test decides, request by request (answer, answer late, answer wrongly, stay silent, hang
//! up), optionally behind TLS.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Encodable, HeaderVersion};
use krust_wire::connection::NodeStream;
use krust_wire::frame::read_frame;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What the node does with one request.
pub enum Action {
    /// Writes this response frame (header and body, without the size) after the delay.
    Answer(Duration, Bytes),
    /// Writes these bytes as they are.
    Raw(Bytes),
    /// Reads on without answering.
    Silence,
    /// Closes the connection.
    HangUp,
}

pub type Handler = Arc<dyn Fn(&RequestHeader, Bytes) -> Action + Send + Sync>;

/// A running fake node.
pub struct FakeNode {
    pub address: String,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
    /// The most requests that were received and not yet answered at one time.
    pub max_outstanding: Arc<AtomicUsize>,
}

/// The response frame of `response` at `version` answering `header`.
pub fn answer<T: Encodable + HeaderVersion>(header: &RequestHeader, response: &T) -> Bytes {
    let version = header.request_api_version;
    let mut frame = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut frame, T::header_version(version))
        .unwrap();
    response.encode(&mut frame, version).unwrap();
    frame.freeze()
}

/// Starts a node on a free loopback port answering with `handler`.
pub async fn start(handler: Handler) -> FakeNode {
    start_with(handler, None).await
}

/// The same, behind TLS when `tls` is given.
pub async fn start_with(handler: Handler, tls: Option<tokio_rustls::TlsAcceptor>) -> FakeNode {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let node = FakeNode {
        address,
        accepted: Arc::default(),
        max_outstanding: Arc::default(),
    };
    let (accepted, max_outstanding) = (node.accepted.clone(), node.max_outstanding.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            accepted.fetch_add(1, Ordering::SeqCst);
            let stream: Box<dyn NodeStream> = match &tls {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(tls) => Box::new(tls),
                    Err(_) => continue,
                },
                None => Box::new(tcp),
            };
            tokio::spawn(serve(stream, handler.clone(), max_outstanding.clone()));
        }
    });
    node
}

async fn serve(stream: Box<dyn NodeStream>, handler: Handler, max_outstanding: Arc<AtomicUsize>) {
    let (mut read, mut write) = tokio::io::split(stream);
    let outstanding = Arc::new(AtomicUsize::new(0));
    // Answers leave in the order the requests came, each not before its time.
    let (replies, mut queue) = mpsc::unbounded_channel::<(Instant, Option<Bytes>)>();
    let writer_outstanding = outstanding.clone();
    tokio::spawn(async move {
        while let Some((at, bytes)) = queue.recv().await {
            tokio::time::sleep_until(at).await;
            let Some(bytes) = bytes else { return };
            writer_outstanding.fetch_sub(1, Ordering::SeqCst);
            if write.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    while let Ok(mut frame) = read_frame(&mut read, 1 << 20).await {
        let now = outstanding.fetch_add(1, Ordering::SeqCst) + 1;
        max_outstanding.fetch_max(now, Ordering::SeqCst);
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        let reply = match handler(&header, frame) {
            Action::Answer(delay, body) => {
                let mut bytes = BytesMut::new();
                bytes.extend_from_slice(&(body.len() as i32).to_be_bytes());
                bytes.extend_from_slice(&body);
                Some((Instant::now() + delay, Some(bytes.freeze())))
            }
            Action::Raw(bytes) => Some((Instant::now(), Some(bytes))),
            Action::Silence => None,
            Action::HangUp => Some((Instant::now(), None)),
        };
        if let Some(reply) = reply {
            let hang_up = reply.1.is_none();
            let _ = replies.send(reply);
            if hang_up {
                return;
            }
        }
    }
}

/// The test certificates' directory (a CA, and a server certificate it signed for localhost
/// and 127.0.0.1).
pub fn cert(name: &str) -> String {
    format!("{}/tests/certs/{name}", env!("CARGO_MANIFEST_DIR"))
}
