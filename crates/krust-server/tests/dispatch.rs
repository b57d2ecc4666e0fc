//! Request frames through the dispatcher against a real broker core on a temporary log dir.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse,
    ProduceRequest, ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use krust_server::bridge::Bridge;
use krust_server::broker::{encode_batch, Broker};
use krust_server::metadata::metadata_cache::{
    BrokerEndpoint, MetadataDelta, MetadataImage, PartitionMetadata, SupportedVersionRange,
    TopicMetadata,
};
use krust_server::network::dispatch::handle_request;
use krust_server::request::request_context::{Outcome, RequestSlot};
use krust_server::request::routing::{Exposure, PythonApi};
use krust_server::security::session::{SecurityProtocol, Session};
use krust_server::server_context::ServerContext;
use krust_server::settings::BrokerSettings;
use uuid::Uuid;

struct TestBroker {
    _dir: tempfile::TempDir,
    broker: Broker,
    context: Arc<ServerContext>,
}

fn broker_with_topic(topic: &str, partitions: i32) -> TestBroker {
    broker_with(topic, partitions, false, BrokerSettings::default())
}

/// A core serving one topic, with Python owning AllocateProducerIds (internal-only) and
/// CreateTopics, as the controller registers them.
fn broker_with(
    topic: &str,
    partitions: i32,
    internal: bool,
    settings: BrokerSettings,
) -> TestBroker {
    let dir = tempfile::tempdir().unwrap();
    let settings = BrokerSettings {
        log_dirs: vec![dir.path().to_path_buf()],
        ..settings
    };
    let broker = Broker::open(settings).unwrap();
    let partitions = (0..partitions)
        .map(|partition| PartitionMetadata {
            partition,
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        })
        .collect();
    broker
        .apply_metadata(MetadataImage::new(
            "test-cluster".into(),
            1,
            0,
            vec![BrokerEndpoint {
                node_id: 1,
                host: "localhost".into(),
                port: 9092,
                rack: None,
                listeners: Default::default(),
            }],
            vec![TopicMetadata {
                name: topic.into(),
                topic_id: Uuid::from_u128(0x1234_5678_9abc_def0),
                internal,
                configs: Default::default(),
                partitions,
            }],
        ))
        .unwrap();
    let python_api = |max_version, exposure| PythonApi {
        min_version: 0,
        max_version,
        exposure,
    };
    let (bridge, _receiver) = Bridge::new(BTreeMap::from([
        (
            ApiKey::AllocateProducerIds as i16,
            python_api(0, Exposure::Internal),
        ),
        (
            ApiKey::CreateTopics as i16,
            python_api(7, Exposure::Clients),
        ),
    ]));
    let context = broker.server_context(bridge);
    TestBroker {
        _dir: dir,
        broker,
        context,
    }
}

fn client() -> Session {
    Session::client(
        "PLAINTEXT",
        SecurityProtocol::Plaintext,
        "127.0.0.1:50000".parse().unwrap(),
    )
}

/// Handles a frame from a client connection, as the network layer does (without a slot).
async fn send(b: &TestBroker, frame: Bytes) -> Outcome {
    handle_request(&b.context, &client(), frame, RequestSlot::default()).await
}

fn frame<T: Encodable>(api_key: ApiKey, version: i16, body: &T) -> Bytes {
    frame_from("test", api_key, version, body)
}

fn frame_from<T: Encodable>(
    client_id: &'static str,
    api_key: ApiKey,
    version: i16,
    body: &T,
) -> Bytes {
    frame_with_codec(client_id, api_key, version, version, body)
}

/// A frame of `version` whose body is encoded as `codec_version` (the same bytes on the wire).
fn frame_with_codec<T: Encodable>(
    client_id: &'static str,
    api_key: ApiKey,
    version: i16,
    codec_version: i16,
    body: &T,
) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, api_key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, codec_version).unwrap();
    buf.freeze()
}

/// Strips the size prefix and response header, returning the body.
fn response_body(outcome: Outcome, api_key: ApiKey, version: i16) -> Bytes {
    let Outcome::Respond(frame) = outcome else {
        panic!("expected a response");
    };
    let mut bytes = frame.to_bytes().unwrap().freeze();
    let size = bytes.get_i32() as usize;
    assert_eq!(size, bytes.len());
    assert_eq!(bytes.get_i32(), 42, "correlation id echoes the request");
    if api_key.response_header_version(version) >= 1 {
        assert_eq!(bytes.get_u8(), 0, "no tagged fields in the header");
    }
    bytes
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<(Option<Bytes>, Option<Bytes>)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                Some(Bytes::from(format!("key-{i}"))),
                Some(Bytes::copy_from_slice(v.as_bytes())),
            )
        })
        .collect();
    encode_batch(&records, 1_700_000_000_000).unwrap().freeze()
}

fn produce(topic: &str, partitions: Vec<(i32, Bytes)>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(
                partitions
                    .into_iter()
                    .map(|(index, records)| {
                        PartitionProduceData::default()
                            .with_index(index)
                            .with_records(Some(records))
                    })
                    .collect(),
            )])
}

fn fetch(topic: &str, offset: i64, max_wait_ms: i32, session: (i32, i32)) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(1 << 20)])])
}

async fn send_produce(b: &TestBroker, request: &ProduceRequest) -> ProduceResponse {
    let outcome = send(b, frame(ApiKey::Produce, 9, request)).await;
    ProduceResponse::decode(&mut response_body(outcome, ApiKey::Produce, 9), 9).unwrap()
}

async fn send_fetch(b: &TestBroker, request: &FetchRequest) -> FetchResponse {
    let outcome = send(b, frame(ApiKey::Fetch, 12, request)).await;
    FetchResponse::decode(&mut response_body(outcome, ApiKey::Fetch, 12), 12).unwrap()
}

#[tokio::test]
async fn an_apiversions_request_newer_than_ours_gets_a_v0_answer_with_error_35() {
    let b = broker_with_topic("t", 1);
    let request = kafka_protocol::messages::ApiVersionsRequest::default();
    let mut raw = BytesMut::from(&frame(ApiKey::ApiVersions, 3, &request)[..]);
    raw[2..4].copy_from_slice(&99i16.to_be_bytes());
    let outcome = send(&b, raw.freeze()).await;
    let mut body = response_body(outcome, ApiKey::ApiVersions, 0);
    let response = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(response.error_code, 35);
    let produce = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .expect("Produce is advertised");
    assert_eq!(produce.min_version, 3);
}

#[tokio::test]
async fn malformed_frames_close_the_connection() {
    let b = broker_with_topic("t", 1);
    for raw in [
        Bytes::from_static(&[0, 0, 0]),
        Bytes::from_static(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]),
        Bytes::from_static(&[0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0xff]),
    ] {
        let outcome = send(&b, raw).await;
        assert!(matches!(outcome, Outcome::Close(_)));
    }
}

#[tokio::test]
async fn produced_batches_are_fetched_back_with_their_offsets() {
    let b = broker_with_topic("t", 1);
    let first = send_produce(&b, &produce("t", vec![(0, batch(&["a", "b"]))], -1)).await;
    let second = send_produce(&b, &produce("t", vec![(0, batch(&["c"]))], 1)).await;
    assert_eq!(
        first.responses[0].partition_responses[0].error_code, 0,
        "{first:?}"
    );
    assert_eq!(first.responses[0].partition_responses[0].base_offset, 0);
    assert_eq!(second.responses[0].partition_responses[0].base_offset, 2);
    let response = send_fetch(&b, &fetch("t", 1, 0, (0, -1))).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.high_watermark, 3);
    let mut records = partition.records.clone().unwrap();
    let values: Vec<(i64, Bytes)> = RecordBatchDecoder::decode_all(&mut records)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| (r.offset, r.value.unwrap()))
        .collect();
    // A fetch inside a batch returns that whole batch; the client skips offset 0.
    assert_eq!(
        values,
        vec![
            (0, Bytes::from("a")),
            (1, Bytes::from("b")),
            (2, Bytes::from("c"))
        ]
    );
}

#[tokio::test]
async fn a_corrupt_batch_fails_only_its_own_partition() {
    let b = broker_with_topic("t", 2);
    let mut corrupt = BytesMut::from(&batch(&["x"])[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let response = send_produce(
        &b,
        &produce("t", vec![(0, corrupt.freeze()), (1, batch(&["y"]))], 1),
    )
    .await;
    let partitions = &response.responses[0].partition_responses;
    assert_eq!(partitions[0].error_code, 2, "CORRUPT_MESSAGE");
    assert_eq!(partitions[1].error_code, 0);
    assert_eq!(
        b.context
            .replicas
            .partition("t", 0)
            .unwrap()
            .log_end_offset(),
        0
    );
}

#[tokio::test]
async fn unknown_topics_and_offsets_out_of_range_are_reported() {
    let b = broker_with_topic("t", 1);
    let response = send_produce(&b, &produce("missing", vec![(0, batch(&["x"]))], 1)).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 3);
    let response = send_fetch(&b, &fetch("t", 5, 0, (0, -1))).await;
    assert_eq!(response.responses[0].partitions[0].error_code, 1);
}

/// Kafka closes the connection of a failed acks=0 produce, so the producer notices.
#[tokio::test]
async fn a_failed_acks_zero_produce_closes_the_connection() {
    let b = broker_with_topic("t", 1);
    let request = produce("missing", vec![(0, batch(&["x"]))], 0);
    let outcome = send(&b, frame(ApiKey::Produce, 9, &request)).await;
    assert!(matches!(outcome, Outcome::Close(_)));
}

#[tokio::test]
async fn acks_zero_gets_no_response() {
    let b = broker_with_topic("t", 1);
    let request = produce("t", vec![(0, batch(&["x"]))], 0);
    let outcome = send(&b, frame(ApiKey::Produce, 9, &request)).await;
    assert!(matches!(outcome, Outcome::NoResponse));
    assert_eq!(
        b.context
            .replicas
            .partition("t", 0)
            .unwrap()
            .log_end_offset(),
        1
    );
}

#[tokio::test]
async fn a_waiting_fetch_is_woken_by_a_produce() {
    let b = Arc::new(broker_with_topic("t", 1));
    let producer = b.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        send_produce(&producer, &produce("t", vec![(0, batch(&["late"]))], 1)).await;
    });
    let response = send_fetch(&b, &fetch("t", 0, 30_000, (0, -1))).await;
    let records = response.responses[0].partitions[0].records.clone().unwrap();
    assert!(
        !records.is_empty(),
        "the fetch returned the record produced while it waited"
    );
}

#[tokio::test]
async fn an_incremental_fetch_session_omits_unchanged_partitions() {
    let b = broker_with_topic("t", 1);
    send_produce(&b, &produce("t", vec![(0, batch(&["a"]))], 1)).await;
    let full = send_fetch(&b, &fetch("t", 0, 0, (0, 0))).await;
    assert!(full.session_id > 0);
    assert_eq!(full.responses[0].partitions.len(), 1);
    let mut incremental = fetch("t", 1, 0, (full.session_id, 1));
    let next = send_fetch(&b, &incremental).await;
    assert_eq!(next.session_id, full.session_id);
    // The client re-sent the partition with its new offset, so it is answered once more.
    assert_eq!(next.responses.len(), 1);
    incremental.topics.clear();
    incremental.session_epoch = 2;
    let idle = send_fetch(&b, &incremental).await;
    assert!(idle.responses.is_empty(), "nothing changed, nothing sent");
    assert_eq!(b.broker.settings().node_id, 1);
}

#[tokio::test]
async fn a_client_cannot_produce_to_an_internal_topic() {
    let b = broker_with("__consumer_offsets", 2, true, BrokerSettings::default());
    let request = produce(
        "__consumer_offsets",
        vec![(0, batch(&["forged"])), (1, batch(&["forged"]))],
        -1,
    );
    let response = send_produce(&b, &request).await;
    for partition in &response.responses[0].partition_responses {
        assert_eq!(
            partition.error_code,
            ResponseError::InvalidTopicException.code()
        );
        assert_eq!(
            partition.error_message.as_ref().map(|m| m.as_str()),
            Some("Cannot append to internal topic")
        );
    }
    let fetched = send_fetch(&b, &fetch("__consumer_offsets", 0, 0, (0, -1))).await;
    let records = fetched.responses[0].partitions[0].records.clone().unwrap();
    assert!(records.is_empty(), "nothing was appended");
}

#[tokio::test]
async fn internal_only_apis_are_neither_advertised_nor_served_to_clients() {
    let b = broker_with_topic("t", 1);
    let request = kafka_protocol::messages::ApiVersionsRequest::default();
    let outcome = send(&b, frame(ApiKey::ApiVersions, 0, &request)).await;
    let mut body = response_body(outcome, ApiKey::ApiVersions, 0);
    let advertised = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    let keys: Vec<i16> = advertised.api_keys.iter().map(|k| k.api_key).collect();
    assert!(keys.contains(&(ApiKey::CreateTopics as i16)));
    assert!(!keys.contains(&(ApiKey::AllocateProducerIds as i16)));

    // The client id the core's own requests carry gives a client nothing.
    let allocate = AllocateProducerIdsRequest::default().with_broker_id(BrokerId(1));
    let raw = frame_from("krust-internal", ApiKey::AllocateProducerIds, 0, &allocate);
    assert!(matches!(send(&b, raw).await, Outcome::Close(_)));
}

async fn api_versions(b: &TestBroker, version: i16) -> ApiVersionsResponse {
    let request = kafka_protocol::messages::ApiVersionsRequest::default();
    let outcome = send(b, frame(ApiKey::ApiVersions, version, &request)).await;
    let mut body = response_body(outcome, ApiKey::ApiVersions, 0);
    ApiVersionsResponse::decode(&mut body, version).unwrap()
}

#[tokio::test]
async fn apiversions_reports_supported_and_finalized_features_as_kafka_does() {
    let b = broker_with_topic("t", 1);
    let range = |min, max| SupportedVersionRange { min, max };
    let supported = BTreeMap::from([
        ("metadata.version".to_string(), range(12, 14)),
        ("group.version".to_string(), range(0, 0)),
    ]);
    let finalized = BTreeMap::from([
        ("metadata.version".to_string(), 14),
        ("group.version".to_string(), 0),
    ]);
    let image = MetadataImage::new("c".into(), 1, 7, vec![], vec![]);
    b.broker
        .apply_metadata(image.with_features(supported, finalized))
        .unwrap();

    let names = |keys: Vec<String>| keys.join(",");
    let v4 = api_versions(&b, 4).await;
    let supported: Vec<String> = v4
        .supported_features
        .iter()
        .map(|f| format!("{}={}-{}", f.name.as_str(), f.min_version, f.max_version))
        .collect();
    assert_eq!(names(supported), "group.version=0-0,metadata.version=12-14");
    // A level of 0 is not finalized; min and max level are the one level.
    let finalized: Vec<String> = v4
        .finalized_features
        .iter()
        .map(|f| {
            format!(
                "{}={}-{}",
                f.name.as_str(),
                f.min_version_level,
                f.max_version_level
            )
        })
        .collect();
    assert_eq!(names(finalized), "metadata.version=14-14");
    assert_eq!(v4.finalized_features_epoch, 7);
    assert!(!v4.zk_migration_ready);

    // Below v4 a supported minimum of 0 breaks older clients' parsers (KAFKA-17011).
    let v3 = api_versions(&b, 3).await;
    let supported: Vec<&str> = v3
        .supported_features
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(supported, ["metadata.version"]);

    // A delta's finalized levels replace the image's; the epoch is the delta's offset.
    let delta = MetadataDelta {
        metadata_offset: 9,
        controller_id: 1,
        finalized_features: Some(BTreeMap::from([("metadata.version".to_string(), 13)])),
        ..MetadataDelta::default()
    };
    b.broker.apply_metadata_delta(&delta).unwrap();
    let after = api_versions(&b, 4).await;
    assert_eq!(after.finalized_features_epoch, 9);
    assert_eq!(after.finalized_features[0].max_version_level, 13);
}

#[tokio::test]
async fn a_parked_fetch_gives_back_its_request_slot() {
    let settings = BrokerSettings {
        queued_max_requests: 1,
        ..BrokerSettings::default()
    };
    let b = broker_with("t", 1, false, settings);
    let session = client();
    let permit = b.context.request_slots.acquire().await.unwrap();
    let raw = frame(ApiKey::Fetch, 12, &fetch("t", 0, 30_000, (0, -1)));
    let parked = handle_request(&b.context, &session, raw, RequestSlot::new(permit));
    tokio::pin!(parked);
    // The only slot comes back while the fetch waits for data.
    let next_request = async {
        tokio::select! {
            slot = b.context.request_slots.acquire() => slot.unwrap(),
            _ = &mut parked => panic!("the fetch answered without data"),
        }
    };
    let slot = tokio::time::timeout(Duration::from_secs(20), next_request)
        .await
        .expect("the waiting fetch kept the only request slot");
    drop(slot);
    send_produce(&b, &produce("t", vec![(0, batch(&["wake"]))], 1)).await;
    assert!(matches!(parked.await, Outcome::Respond(_)));
}

/// kafka-protocol refuses to encode a field set in a version that lacks it; every advertised
/// version must still answer with data in the log and the topic present.
#[tokio::test]
async fn every_advertised_version_of_the_native_apis_answers() {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{
        AlterReplicaLogDirsRequest, DescribeClusterRequest, DescribeLogDirsRequest,
        DescribeProducersRequest, DescribeTopicPartitionsRequest, ListOffsetsRequest,
        MetadataRequest, OffsetForLeaderEpochRequest,
    };

    let b = broker_with_topic("t", 1);
    send_produce(&b, &produce("t", vec![(0, batch(&["a"]))], 1)).await;
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))]));
    let list_offsets = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    type FrameOfVersion = Box<dyn Fn(i16) -> Bytes>;
    let cases: Vec<(ApiKey, FrameOfVersion)> = vec![
        (
            ApiKey::Metadata,
            Box::new(move |v| frame(ApiKey::Metadata, v, &metadata)),
        ),
        (
            // v11's frame is v10's (KIP-1023 adds only a target timestamp).
            ApiKey::ListOffsets,
            Box::new(move |v| {
                frame_with_codec("test", ApiKey::ListOffsets, v, v.min(10), &list_offsets)
            }),
        ),
        (
            ApiKey::Produce,
            Box::new(|v| {
                let mut request = produce("t", vec![(0, batch(&["b"]))], 1);
                if v >= 13 {
                    // KIP-516: v13 names the topic by id only.
                    request.topic_data[0].name = TopicName::default();
                    request.topic_data[0].topic_id = Uuid::from_u128(0x1234_5678_9abc_def0);
                }
                frame(ApiKey::Produce, v, &request)
            }),
        ),
        (
            ApiKey::DescribeCluster,
            Box::new(|v| {
                frame(
                    ApiKey::DescribeCluster,
                    v,
                    &DescribeClusterRequest::default(),
                )
            }),
        ),
        (
            ApiKey::OffsetForLeaderEpoch,
            Box::new(|v| {
                let request = OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![OffsetForLeaderTopic::default()
                        .with_topic(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0)])]);
                frame(ApiKey::OffsetForLeaderEpoch, v, &request)
            }),
        ),
        (
            ApiKey::DescribeLogDirs,
            Box::new(|v| {
                frame(
                    ApiKey::DescribeLogDirs,
                    v,
                    &DescribeLogDirsRequest::default(),
                )
            }),
        ),
        (
            ApiKey::AlterReplicaLogDirs,
            Box::new(|v| {
                let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
                    AlterReplicaLogDir::default()
                        .with_path(StrBytes::from_static_str("/not/a/log/dir"))
                        .with_topics(vec![AlterReplicaLogDirTopic::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")))
                            .with_partitions(vec![0])]),
                ]);
                frame(ApiKey::AlterReplicaLogDirs, v, &request)
            }),
        ),
        (
            ApiKey::DescribeProducers,
            Box::new(|v| {
                let request =
                    DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partition_indexes(vec![0])]);
                frame(ApiKey::DescribeProducers, v, &request)
            }),
        ),
        (
            ApiKey::DescribeTopicPartitions,
            Box::new(|v| {
                let request =
                    DescribeTopicPartitionsRequest::default().with_response_partition_limit(10);
                frame(ApiKey::DescribeTopicPartitions, v, &request)
            }),
        ),
        (
            ApiKey::Fetch,
            Box::new(|v| frame(ApiKey::Fetch, v, &fetch("t", 0, 0, (0, -1)))),
        ),
    ];
    for (api_key, build) in cases {
        let route = b.context.routes.route(&client(), api_key).unwrap();
        for version in route.min_version..=route.max_version {
            let outcome = send(&b, build(version)).await;
            assert!(
                matches!(outcome, Outcome::Respond(_)),
                "{api_key:?} v{version} did not answer"
            );
        }
    }
}

/// A frame claiming an array of i32::MAX elements must be rejected, not abort the process while
/// reserving memory for them (found by fuzz/request_decoding; see vendor/README.md).
#[test]
fn a_forged_array_length_is_rejected_without_allocating_it() {
    use krust_server::handlers::NativeRequest;
    use krust_server::request::request_context::parse_header;

    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(4)
        .with_correlation_id(1)
        .encode(&mut frame, ApiKey::Fetch.request_header_version(4))
        .unwrap();
    // replica id, max wait, min bytes, max bytes, isolation level, then the topics array count
    frame.extend_from_slice(&(-1i32).to_be_bytes());
    frame.extend_from_slice(&500i32.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&1024i32.to_be_bytes());
    frame.extend_from_slice(&[0]);
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    let (api_key, header, body) = parse_header(frame.freeze()).unwrap();
    let decoded = NativeRequest::decode(api_key, header.request_api_version, body);
    assert!(decoded.is_err(), "a truncated array must fail to decode");
}

#[tokio::test]
async fn a_new_topics_logs_may_follow_the_answer_but_a_deletion_is_done_before_it() {
    let b = broker_with("t", 1, false, BrokerSettings::default());
    let topic_id = Uuid::from_u128(7);
    let created = MetadataDelta {
        metadata_offset: 1,
        controller_id: 1,
        topics: vec![TopicMetadata {
            name: "new".into(),
            topic_id,
            internal: false,
            configs: Default::default(),
            partitions: vec![PartitionMetadata {
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
            }],
        }],
        ..MetadataDelta::default()
    };
    b.broker.apply_metadata_delta(&created).unwrap();
    b.broker.wait_for_metadata_applied();
    let dir = b._dir.path().join("new-0");
    assert!(dir.is_dir());
    let deleted = MetadataDelta {
        metadata_offset: 2,
        controller_id: 1,
        deleted_topic_ids: vec![topic_id],
        ..MetadataDelta::default()
    };
    b.broker.apply_metadata_delta(&deleted).unwrap();
    assert!(!dir.exists());
}

/// As Kafka: a follower's fetch (a replica id) needs CLUSTER_ACTION on the cluster, not READ
/// on the topic; a consumer's needs READ.
#[tokio::test]
async fn a_follower_fetch_needs_cluster_action_and_a_consumer_fetch_read() {
    use krust_server::authorizer::{AclOperation, ResourceType};
    let b = broker_with_topic("t", 1);
    let (authorizer, mut receiver) = b.broker.authorizer();
    std::thread::spawn(move || {
        while let Some(call) = receiver.recv_blocking() {
            let answer = call
                .actions
                .iter()
                .map(|a| {
                    a.operation == AclOperation::ClusterAction
                        && a.resource_type == ResourceType::Cluster
                })
                .collect();
            let _ = call.reply.send(Some(answer));
        }
    });
    let (bridge, _receiver) = Bridge::new(BTreeMap::new());
    let b = TestBroker {
        context: b.broker.authorized_server_context(bridge, Some(authorizer)),
        ..b
    };
    let code = |response: FetchResponse| response.responses[0].partitions[0].error_code;
    let consumer = send_fetch(&b, &fetch("t", 0, 0, (0, -1))).await;
    assert_eq!(
        code(consumer),
        ResponseError::TopicAuthorizationFailed.code()
    );
    // Authorized as a broker, replica 2 is refused only because it is no replica of t-0.
    let follower = fetch("t", 0, 0, (0, -1)).with_replica_id(BrokerId(2));
    let answer = send_fetch(&b, &follower).await;
    assert_eq!(code(answer), ResponseError::NotLeaderOrFollower.code());
}

/// A consumer's fetch waiting on a leader that becomes a follower is answered at once with
/// NOT_LEADER_OR_FOLLOWER (Kafka's DelayedFetch), not after its max wait with nothing.
#[tokio::test]
async fn a_waiting_fetch_on_a_leader_that_steps_down_gets_not_leader() {
    let b = Arc::new(broker_with_topic("t", 1));
    let demoted = b.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let image = demoted.context.metadata.image();
        let mut topic = (**image.topic("t").unwrap()).clone();
        topic.partitions[0] = PartitionMetadata {
            leader: 2,
            leader_epoch: 1,
            partition_epoch: 1,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            ..topic.partitions[0].clone()
        };
        tokio::task::spawn_blocking(move || {
            demoted
                .broker
                .apply_metadata_delta(&MetadataDelta {
                    metadata_offset: 1,
                    controller_id: 1,
                    brokers: None,
                    topics: vec![topic],
                    deleted_topic_ids: Vec::new(),
                    finalized_features: None,
                    log_defaults: None,
                })
                .unwrap();
        });
    });
    let response = send_fetch(&b, &fetch("t", 0, 30_000, (0, -1))).await;
    assert_eq!(
        response.responses[0].partitions[0].error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
}

/// As Kafka: ListOffsets LATEST answers a consumer with the high watermark and a follower
/// (a replica id) with the log end, which its out-of-range handling compares with its own.
#[tokio::test]
async fn list_offsets_latest_is_the_log_end_for_a_follower_and_the_high_watermark_for_a_consumer() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let b = broker_with_topic("t", 1);
    let image = b.context.metadata.image();
    let mut topic = (**image.topic("t").unwrap()).clone();
    // Replica 2 joins and has fetched nothing: it holds the high watermark at 0.
    topic.partitions[0] = PartitionMetadata {
        partition_epoch: 1,
        replicas: vec![1, 2],
        isr: vec![1, 2],
        ..topic.partitions[0].clone()
    };
    b.broker
        .apply_metadata_delta(&MetadataDelta {
            metadata_offset: 1,
            controller_id: 1,
            brokers: None,
            topics: vec![topic],
            deleted_topic_ids: Vec::new(),
            finalized_features: None,
            log_defaults: None,
        })
        .unwrap();
    send_produce(&b, &produce("t", vec![(0, batch(&["a", "b"]))], 1)).await;
    let latest = |replica_id| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])])
    };
    let mut offsets = Vec::new();
    for replica_id in [-1, 2] {
        let outcome = send(&b, frame(ApiKey::ListOffsets, 4, &latest(replica_id))).await;
        let mut body = response_body(outcome, ApiKey::ListOffsets, 4);
        let response = ListOffsetsResponse::decode(&mut body, 4).unwrap();
        offsets.push(response.topics[0].partitions[0].offset);
    }
    assert_eq!(offsets, vec![0, 2]);
}
