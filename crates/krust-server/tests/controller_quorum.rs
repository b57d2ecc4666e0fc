//! The controller quorum through the dispatcher: DescribeQuorum on the leader, quorum RPCs
//! only on a controller listener.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use krust_raft::state_machine::{AppliedRecord, Applier, ApplyError};
use krust_server::bridge::Bridge;
use krust_server::broker::Broker;
use krust_server::network::dispatch::handle_request;
use krust_server::request::request_context::{Outcome, RequestSlot};
use krust_server::security::session::{SecurityProtocol, Session};
use krust_server::server_context::ServerContext;
use krust_server::settings::{BrokerSettings, QuorumSettings};

struct NoImage;

impl Applier for NoImage {
    fn apply(&self, _records: Vec<AppliedRecord>) -> Result<(), ApplyError> {
        Ok(())
    }

    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError> {
        Ok(Some(Vec::new()))
    }

    fn load_snapshot(&self, _end_offset: i64, _records: Vec<Bytes>) -> Result<(), ApplyError> {
        Ok(())
    }
}

async fn leader() -> (tempfile::TempDir, Broker, Arc<ServerContext>) {
    let dir = tempfile::tempdir().unwrap();
    let settings = BrokerSettings {
        log_dirs: vec![dir.path().to_path_buf()],
        quorum: QuorumSettings {
            voters: vec![(1, "127.0.0.1".into(), 19093)],
            controller_listener_names: vec!["CONTROLLER".into()],
            ..QuorumSettings::default()
        },
        ..BrokerSettings::default()
    };
    let broker = Broker::open(settings).unwrap();
    broker.start_quorum(Arc::new(NoImage)).await.unwrap();
    let (bridge, _receiver) = Bridge::new(BTreeMap::new());
    let context = broker.server_context(bridge);
    (dir, broker, context)
}

fn session(listener: &str) -> Session {
    Session::client(
        listener,
        SecurityProtocol::Plaintext,
        "127.0.0.1:50000".parse().unwrap(),
    )
}

async fn send(context: &ServerContext, listener: &str, frame: Bytes) -> Outcome {
    let session = session(listener);
    handle_request(context, &session, frame, RequestSlot::default()).await
}

fn describe_quorum_frame(topic: &'static str, version: i16) -> Bytes {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(topic)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::DescribeQuorum as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut buf = BytesMut::new();
    let header_version = ApiKey::DescribeQuorum.request_header_version(version);
    header.encode(&mut buf, header_version).unwrap();
    request.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn describe_quorum_response(outcome: Outcome, version: i16) -> DescribeQuorumResponse {
    let Outcome::Respond(frame) = outcome else {
        panic!("expected a response");
    };
    let mut bytes = frame.to_bytes().unwrap().freeze();
    bytes.advance(8);
    if ApiKey::DescribeQuorum.response_header_version(version) >= 1 {
        bytes.advance(1);
    }
    DescribeQuorumResponse::decode(&mut bytes, version).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_quorum_names_the_leader_its_epoch_and_the_committed_offset() {
    let (_dir, broker, context) = leader().await;
    let last = broker
        .quorum()
        .unwrap()
        .propose(vec![Bytes::from_static(b"record")])
        .await
        .unwrap();
    let raft = broker.quorum().unwrap().raft().unwrap().clone();
    let published = |s: &krust_raft::quorum::QuorumStatus| s.high_watermark > last;
    assert!(krust_raft::quorum::wait_for(&raft, Duration::from_secs(30), published).await);
    let frame = describe_quorum_frame("__cluster_metadata", 2);
    let outcome = send(&context, "PLAINTEXT", frame);
    let response = describe_quorum_response(outcome.await, 2);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.leader_id.0, 1);
    assert!(partition.leader_epoch >= 1);
    assert_eq!(partition.high_watermark, last + 1);
    assert_eq!(partition.current_voters.len(), 1);
    assert_eq!(partition.current_voters[0].log_end_offset, last + 1);
    assert_eq!(response.nodes[0].listeners[0].port, 19093);

    let frame = describe_quorum_frame("other", 2);
    let outcome = send(&context, "PLAINTEXT", frame);
    let response = describe_quorum_response(outcome.await, 2);
    let code = response.topics[0].partitions[0].error_code;
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    broker.quorum().unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_rpcs_close_a_client_listeners_connection() {
    let (_dir, broker, context) = leader().await;
    let vote = krust_raft::wire::encode_vote_request(
        &krust_raft::openraft::raft::VoteRequest::new(krust_raft::Vote::new(9, 2), None),
    );
    let voters = broker.quorum().unwrap().voters().clone();
    let vote = krust_raft::wire::encode_request(&voters, &vote).unwrap();
    let frame = krust_raft::network::request_frame(krust_raft::wire::VOTE, 1, "peer", &vote);
    let body = frame.slice(4..);
    let outcome = send(&context, "PLAINTEXT", body.clone());
    assert!(matches!(outcome.await, Outcome::Close(reason) if reason.contains("PLAINTEXT")));
    let outcome = send(&context, "CONTROLLER", body);
    let Outcome::Respond(frame) = outcome.await else {
        panic!("a controller listener answers the vote");
    };
    let mut response = frame.to_bytes().unwrap().freeze();
    response.advance(8);
    let krust_raft::wire::Answer::Body(response) =
        krust_raft::wire::decode_response(response).unwrap()
    else {
        panic!("the same voters are not an inconsistent voter set");
    };
    let answer = krust_raft::wire::decode_vote_response(response).unwrap();
    // A candidate from a later term that was never heard of, with no log, is refused.
    assert!(!answer.vote_granted);
    broker.quorum().unwrap().shutdown().await;
}
