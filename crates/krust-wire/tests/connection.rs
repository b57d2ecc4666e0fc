//! A connection against an in-process fake node: framing, pipelining, correlation ids,
//! oversized frames, timeouts, the in-flight bound, reconnects and the blocking facade.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{answer, start, Action};
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::{Decodable, StrBytes};
use krust_wire::{
    Backoff, BlockingConnection, Connection, ConnectionConfig, Reconnecting, WireError,
};

/// A Metadata answer naming one broker whose id is the request's correlation id.
fn metadata(header: &kafka_protocol::messages::RequestHeader, mut body: Bytes) -> Bytes {
    MetadataRequest::decode(&mut body, header.request_api_version).unwrap();
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(header.correlation_id))
        .with_host(StrBytes::from_static_str("localhost"))
        .with_port(9092);
    answer(
        header,
        &MetadataResponse::default().with_brokers(vec![broker]),
    )
}

fn config() -> Arc<ConnectionConfig> {
    Arc::new(ConnectionConfig::new("test").with_request_timeout(Duration::from_secs(5)))
}

#[tokio::test]
async fn pipelined_requests_each_get_their_own_answer() {
    let node = start(Arc::new(|h, b| {
        // Later requests are answered sooner: the order still holds on the wire.
        let delay = Duration::from_millis(50u64.saturating_sub(10 * h.correlation_id as u64));
        Action::Answer(delay, metadata(h, b))
    }))
    .await;
    let connection = Connection::connect(&node.address, config()).await.unwrap();
    let request = MetadataRequest::default();
    let answers = futures_join(&connection, &request).await;
    for (sent, response) in answers.into_iter().enumerate() {
        assert_eq!(response.unwrap().brokers[0].node_id.0, sent as i32);
    }
}

/// Five Metadata requests at once, their answers in the order they were sent.
async fn futures_join(
    connection: &Connection,
    request: &MetadataRequest,
) -> Vec<Result<MetadataResponse, WireError>> {
    let (a, b, c, d, e) = tokio::join!(
        connection.send(request, 12),
        connection.send(request, 12),
        connection.send(request, 12),
        connection.send(request, 12),
        connection.send(request, 12),
    );
    vec![a, b, c, d, e]
}

#[tokio::test]
async fn in_flight_requests_are_bounded() {
    let node = start(Arc::new(|h, b| {
        Action::Answer(Duration::from_millis(30), metadata(h, b))
    }))
    .await;
    let mut config = ConnectionConfig::new("test");
    config.max_in_flight = 2;
    let connection = Connection::connect(&node.address, Arc::new(config))
        .await
        .unwrap();
    let answers = futures_join(&connection, &MetadataRequest::default()).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(node.max_outstanding.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_wrong_correlation_id_fails_the_request_and_closes_the_connection() {
    let node = start(Arc::new(|h, b| {
        let mut wrong = h.clone();
        wrong.correlation_id += 7;
        Action::Answer(Duration::ZERO, metadata(&wrong, b))
    }))
    .await;
    let connection = Connection::connect(&node.address, config()).await.unwrap();
    let error = connection
        .send(&MetadataRequest::default(), 12)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            WireError::CorrelationMismatch {
                expected: 0,
                got: 7,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("Metadata response from"));
    assert!(connection.is_closed());
    assert!(matches!(
        connection.send(&MetadataRequest::default(), 12).await,
        Err(WireError::Disconnected { .. })
    ));
}

#[tokio::test]
async fn an_oversized_response_is_refused_before_it_is_read() {
    let node = start(Arc::new(|_, _| {
        Action::Raw(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]))
    }))
    .await;
    let mut config = ConnectionConfig::new("test");
    config.max_response_bytes = 1024;
    let connection = Connection::connect(&node.address, Arc::new(config))
        .await
        .unwrap();
    let error = connection
        .send(&MetadataRequest::default(), 12)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            WireError::ResponseTooLarge {
                size: 2147483647,
                limit: 1024,
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_silent_node_times_the_request_out_and_the_connection_closes() {
    let node = start(Arc::new(|_, _| Action::Silence)).await;
    let config = ConnectionConfig::new("test").with_request_timeout(Duration::from_millis(100));
    let connection = Connection::connect(&node.address, Arc::new(config))
        .await
        .unwrap();
    let error = connection
        .send(&MetadataRequest::default(), 12)
        .await
        .unwrap_err();
    assert!(matches!(error, WireError::Timeout { .. }), "{error}");
    assert!(error.is_retriable());
    assert!(connection.is_closed());
}

#[tokio::test]
async fn nothing_listening_is_a_retriable_connect_error() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap().to_string();
    drop(free);
    let error = Connection::connect(&address, config()).await.err().unwrap();
    assert!(matches!(error, WireError::Connect { .. }) && error.is_retriable());
}

#[tokio::test]
async fn a_dropped_connection_is_reopened_after_a_backoff() {
    // Every second request is answered by hanging up.
    let node = start(Arc::new(|h, b| {
        if h.correlation_id == 1 {
            Action::HangUp
        } else {
            Action::Answer(Duration::ZERO, metadata(h, b))
        }
    }))
    .await;
    let backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };
    let channel = Reconnecting::new(node.address.clone(), config(), backoff);
    let request = MetadataRequest::default();
    assert!(channel.send(&request, 12).await.is_ok());
    let error = channel.send(&request, 12).await.unwrap_err();
    assert!(error.is_retriable(), "{error}");
    let started = tokio::time::Instant::now();
    assert!(channel.send(&request, 12).await.is_ok());
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(node.accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn the_blocking_facade_runs_the_same_connection_on_a_plain_thread() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let node = runtime.block_on(start(Arc::new(|h, b| {
        Action::Answer(Duration::ZERO, metadata(h, b))
    })));
    let address = node.address.clone();
    std::thread::spawn(move || {
        let mut connection = BlockingConnection::connect(&address, config()).unwrap();
        for expected in 0..3 {
            let response = connection.send(&MetadataRequest::default(), 12).unwrap();
            assert_eq!(response.brokers[0].node_id.0, expected);
        }
    })
    .join()
    .unwrap();
}

#[tokio::test]
async fn a_body_encoded_by_the_caller_is_framed_with_the_connections_header() {
    use kafka_protocol::messages::ApiKey;
    use kafka_protocol::protocol::Encodable;
    let node = start(Arc::new(|h, b| {
        Action::Answer(Duration::ZERO, metadata(h, b))
    }))
    .await;
    let connection = Connection::connect(&node.address, config()).await.unwrap();
    let mut body = bytes::BytesMut::new();
    MetadataRequest::default().encode(&mut body, 12).unwrap();
    let key = ApiKey::Metadata;
    let versions = (
        key.request_header_version(12),
        key.response_header_version(12),
    );
    let mut answer = connection
        .send_raw(key as i16, 12, versions, &body, Duration::from_secs(5))
        .await
        .unwrap();
    let response = MetadataResponse::decode(&mut answer, 12).unwrap();
    assert_eq!(response.brokers[0].node_id.0, 0);
}
