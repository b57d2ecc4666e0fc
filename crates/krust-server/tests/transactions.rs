//! Transactions as consumers see them (KIP-98): Fetch with isolation_level read_committed
//! reads only below the last stable offset and lists the aborted transactions it overlaps;
//! ListOffsets latest answers the last stable offset. The log is driven by Produce of
//! transactional batches and by markers appended as the transaction coordinator does.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeProducersRequest, DescribeProducersResponse, FetchRequest,
    FetchResponse, ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse,
    RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use krust_server::bridge::Bridge;
use krust_server::broker::Broker;
use krust_server::metadata::metadata_cache::{
    BrokerEndpoint, MetadataImage, PartitionMetadata, TopicMetadata,
};
use krust_server::network::dispatch::handle_request;
use krust_server::request::request_context::{Outcome, RequestSlot};
use krust_server::security::session::{SecurityProtocol, Session};
use krust_server::server_context::ServerContext;
use krust_server::settings::BrokerSettings;
use krust_storage::batch::{check_integrity, compute_crc, split_batches};
use krust_storage::{end_txn_marker, transactional_coordinator_batch, TopicPartition};
use uuid::Uuid;

const NOW: i64 = 1_700_000_000_000;
const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

struct TestBroker {
    _dir: tempfile::TempDir,
    _broker: Broker,
    context: Arc<ServerContext>,
}

fn broker() -> TestBroker {
    let dir = tempfile::tempdir().unwrap();
    let settings = BrokerSettings {
        log_dirs: vec![dir.path().to_path_buf()],
        ..BrokerSettings::default()
    };
    let broker = Broker::open(settings).unwrap();
    let endpoint = BrokerEndpoint {
        node_id: 1,
        host: "localhost".into(),
        port: 9092,
        rack: None,
        listeners: Default::default(),
    };
    let topic = TopicMetadata {
        name: "t".into(),
        topic_id: Uuid::from_u128(7),
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
    };
    broker
        .apply_metadata(MetadataImage::new(
            "test-cluster".into(),
            1,
            0,
            vec![endpoint],
            vec![topic],
        ))
        .unwrap();
    let (bridge, _receiver) = Bridge::new(BTreeMap::new());
    let context = broker.server_context(bridge);
    TestBroker {
        _dir: dir,
        _broker: broker,
        context,
    }
}

async fn call<Req: Encodable, Resp: Decodable>(
    b: &TestBroker,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut frame = BytesMut::new();
    header
        .encode(&mut frame, api_key.request_header_version(version))
        .unwrap();
    request.encode(&mut frame, version).unwrap();
    let session = Session::client(
        "PLAINTEXT",
        SecurityProtocol::Plaintext,
        "127.0.0.1:50000".parse().unwrap(),
    );
    let outcome =
        handle_request(&b.context, &session, frame.freeze(), RequestSlot::default()).await;
    let Outcome::Respond(response) = outcome else {
        panic!("expected a response");
    };
    let mut bytes = response.to_bytes().unwrap().freeze();
    bytes.advance(8);
    if api_key.response_header_version(version) >= 1 {
        bytes.advance(1);
    }
    Resp::decode(&mut bytes, version).unwrap()
}

/// A transactional producer's batch: the coordinator's layout with a client's sequence.
fn txn_batch(producer_id: i64, sequence: i32, values: &[&[u8]]) -> Bytes {
    let records: Vec<_> = values.iter().map(|v| (Some(&b"k"[..]), Some(*v))).collect();
    let mut batch = transactional_coordinator_batch(producer_id, 0, &records, NOW);
    batch[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

async fn produce(b: &TestBroker, records: Bytes) -> i64 {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = call(b, ApiKey::Produce, 9, &request).await;
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0, "{partition:?}");
    partition.base_offset
}

fn end_txn(b: &TestBroker, producer_id: i64, commit: bool) -> i64 {
    let marker = end_txn_marker(producer_id, 0, 0, commit, NOW);
    b.context
        .replicas
        .append_internal(&TopicPartition::new("t", 0), &marker, NOW)
        .unwrap()
        .first_offset
}

fn fetch_request(offset: i64, isolation_level: i8, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation_level)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(1 << 20)])])
}

async fn fetch(b: &TestBroker, offset: i64, isolation_level: i8) -> PartitionData {
    let request = fetch_request(offset, isolation_level, 0);
    let response: FetchResponse = call(b, ApiKey::Fetch, 12, &request).await;
    response.responses[0].partitions[0].clone()
}

/// The base offsets of the returned batches.
fn batch_offsets(partition: &PartitionData) -> Vec<i64> {
    let records = partition.records.clone().unwrap_or_default();
    split_batches(&records)
        .unwrap()
        .into_iter()
        .map(|range| check_integrity(&records[range]).unwrap().base_offset)
        .collect()
}

fn aborted(partition: &PartitionData) -> Option<Vec<(i64, i64)>> {
    partition.aborted_transactions.as_ref().map(|list| {
        list.iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect()
    })
}

/// DescribeProducers: each producer's id and the first offset of its open transaction.
async fn open_transactions(b: &TestBroker) -> Vec<(i64, i64)> {
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partition_indexes(vec![0])]);
    let response: DescribeProducersResponse = call(b, ApiKey::DescribeProducers, 0, &request).await;
    let mut producers: Vec<(i64, i64)> = response.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.current_txn_start_offset))
        .collect();
    producers.sort_unstable();
    producers
}

async fn latest(b: &TestBroker, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = call(b, ApiKey::ListOffsets, 5, &request).await;
    response.topics[0].partitions[0].offset
}

#[tokio::test]
async fn read_committed_reads_below_the_last_stable_offset_and_lists_aborted_transactions() {
    let b = broker();
    assert_eq!(produce(&b, txn_batch(1, 0, &[b"a1", b"a2"])).await, 0);
    assert_eq!(produce(&b, txn_batch(2, 0, &[b"c1"])).await, 2);

    let committed = fetch(&b, 0, READ_COMMITTED).await;
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (3, 0)
    );
    assert!(
        batch_offsets(&committed).is_empty(),
        "both transactions are open"
    );
    assert_eq!(aborted(&committed), Some(vec![]));
    let uncommitted = fetch(&b, 0, READ_UNCOMMITTED).await;
    assert_eq!(batch_offsets(&uncommitted), vec![0, 2]);
    assert_eq!(uncommitted.last_stable_offset, 0);
    assert_eq!(
        aborted(&uncommitted),
        None,
        "null for read_uncommitted, as Kafka"
    );
    assert_eq!(
        (
            latest(&b, READ_COMMITTED).await,
            latest(&b, READ_UNCOMMITTED).await
        ),
        (0, 3)
    );
    assert_eq!(open_transactions(&b).await, vec![(1, 0), (2, 2)]);

    assert_eq!(end_txn(&b, 1, false), 3);
    let committed = fetch(&b, 0, READ_COMMITTED).await;
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (4, 2)
    );
    assert_eq!(batch_offsets(&committed), vec![0]);
    assert_eq!(aborted(&committed), Some(vec![(1, 0)]));
    assert_eq!(latest(&b, READ_COMMITTED).await, 2);
    assert_eq!(open_transactions(&b).await, vec![(1, -1), (2, 2)]);

    assert_eq!(end_txn(&b, 2, true), 4);
    let committed = fetch(&b, 2, READ_COMMITTED).await;
    assert_eq!(committed.last_stable_offset, 5);
    assert_eq!(batch_offsets(&committed), vec![2, 3, 4]);
    assert_eq!(
        aborted(&committed),
        Some(vec![(1, 0)]),
        "its marker is in the range"
    );
    assert!(aborted(&fetch(&b, 4, READ_COMMITTED).await)
        .unwrap()
        .is_empty());
    assert_eq!(latest(&b, READ_COMMITTED).await, 5);
}

#[tokio::test]
async fn a_waiting_read_committed_fetch_wakes_when_the_transaction_commits() {
    let b = Arc::new(broker());
    produce(&b, txn_batch(1, 0, &[b"x"])).await;
    let waiting = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let request = fetch_request(0, READ_COMMITTED, 30_000);
            let response: FetchResponse = call(&b, ApiKey::Fetch, 12, &request).await;
            response.responses[0].partitions[0].clone()
        })
    };
    tokio::task::yield_now().await;
    end_txn(&b, 1, true);
    let partition = waiting.await.unwrap();
    assert_eq!(partition.last_stable_offset, 2);
    assert_eq!(batch_offsets(&partition), vec![0, 1]);
}
