//! Two in-process brokers replicating a partition over TCP on 127.0.0.1: acks=all is
//! answered once the follower's fetcher has copied the batch, and after a leader change the
//! old leader follows the new one. Every wait is bounded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, ProduceRequest};
use kafka_protocol::protocol::StrBytes;
use krust_server::bridge::Bridge;
use krust_server::broker::{encode_batch, Broker};
use krust_server::metadata::metadata_cache::{
    BrokerEndpoint, MetadataDelta, MetadataImage, PartitionMetadata, TopicMetadata,
};
use krust_server::partition::{ConsumerRead, FetchIsolation, Partition};
use krust_server::replica::alter_partition::{AlterPartitionFuture, AlterPartitionSender};
use krust_server::settings::{BrokerSettings, ReplicationSettings};
use krust_wire::{BlockingConnection, ConnectionConfig};
use tempfile::TempDir;
use uuid::Uuid;

mod common;
use common::{free_port, listener};

const TOPIC_ID: u128 = 0x5151;
const PATIENCE: Duration = Duration::from_secs(20);

/// A controller that commits every proposed ISR change.
struct CommittingController;

impl AlterPartitionSender for CommittingController {
    fn send(&self, request: AlterPartitionRequest) -> AlterPartitionFuture {
        use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
        let topics = request
            .topics
            .iter()
            .map(|t| {
                TopicData::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_leader_id(request.broker_id)
                                    .with_leader_epoch(p.leader_epoch)
                                    .with_isr(p.new_isr.clone())
                                    .with_partition_epoch(p.partition_epoch + 1)
                            })
                            .collect(),
                    )
            })
            .collect();
        Box::pin(async move { Ok(AlterPartitionResponse::default().with_topics(topics)) })
    }
}

struct Node {
    dir: TempDir,
    broker: Arc<Broker>,
    port: u16,
}

fn node(node_id: i32, port: u16) -> Node {
    node_in(tempfile::tempdir().unwrap(), node_id, port, 30_000)
}

fn node_in(dir: TempDir, node_id: i32, port: u16, replica_lag_time_max_ms: i64) -> Node {
    node_with(
        dir,
        node_id,
        port,
        ReplicationSettings {
            replica_lag_time_max_ms,
            ..test_replication()
        },
    )
}

/// Short waits and backoffs, so fetch rounds come quickly.
fn test_replication() -> ReplicationSettings {
    ReplicationSettings {
        replica_fetch_wait_max_ms: 100,
        replica_fetch_backoff_ms: 50,
        ..ReplicationSettings::default()
    }
}

fn node_with(dir: TempDir, node_id: i32, port: u16, replication: ReplicationSettings) -> Node {
    let listener = listener("PLAINTEXT", port);
    let settings = BrokerSettings {
        node_id,
        listeners: vec![listener.clone()],
        advertised_listeners: vec![listener],
        log_dirs: vec![dir.path().to_path_buf()],
        replication,
        ..BrokerSettings::default()
    };
    Node {
        dir,
        broker: Arc::new(Broker::open(settings).unwrap()),
        port,
    }
}

fn placement(leader: i32, leader_epoch: i32) -> TopicMetadata {
    placement_on(&[1, 2], leader, leader_epoch)
}

fn placement_on(replicas: &[i32], leader: i32, leader_epoch: i32) -> TopicMetadata {
    with_isr(replicas, replicas, leader, leader_epoch)
}

fn with_isr(replicas: &[i32], isr: &[i32], leader: i32, leader_epoch: i32) -> TopicMetadata {
    TopicMetadata {
        name: "t".into(),
        topic_id: Uuid::from_u128(TOPIC_ID),
        internal: false,
        configs: Default::default(),
        partitions: vec![PartitionMetadata {
            partition: 0,
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
        }],
    }
}

fn partition(node: &Node) -> Arc<Partition> {
    let (bridge, _) = Bridge::new(BTreeMap::new());
    node.broker
        .server_context(bridge)
        .replicas
        .partition("t", 0)
        .unwrap()
}

fn produce(node: &Node, values: &[&str]) -> (i16, i64) {
    produce_with_acks(node, values, -1)
}

fn produce_with_acks(node: &Node, values: &[&str], acks: i16) -> (i16, i64) {
    let address = format!("127.0.0.1:{}", node.port);
    let config = Arc::new(ConnectionConfig::new("replication-test"));
    let mut connection = BlockingConnection::connect(&address, config).unwrap();
    let records: Vec<_> = values
        .iter()
        .map(|v| (None, Some(bytes::Bytes::from(v.to_string()))))
        .collect();
    let batch = encode_batch(&records, 1_700_000_000_000).unwrap().freeze();
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(15_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let response = connection.send(&request, 8).unwrap();
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

/// The broker's BytesOutPerSec total for topic t.
fn bytes_out(node: &Node) -> f64 {
    let hosted = std::collections::HashSet::from(["t"]);
    node.broker
        .metrics()
        .topics
        .collect(&hosted)
        .iter()
        .filter(|family| family.name() == "kafka_server_brokertopicmetrics_bytesout_total")
        .flat_map(|family| family.get_metric())
        .map(|metric| metric.get_counter().get_value())
        .sum()
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The partition's whole log, and its leader epochs.
fn contents(partition: &Partition) -> (Vec<u8>, i64) {
    let end = partition.log_end_offset();
    let mut bytes = Vec::new();
    let mut offset = 0;
    while offset < end {
        let read = partition.read(offset, usize::MAX, true, FetchIsolation::HighWatermark);
        // A follower's reads stop at its high watermark: read what it has committed.
        let Ok(ConsumerRead { data: read, .. }) = read else {
            break;
        };
        if read.records.is_empty() {
            break;
        }
        offset = read.next_offset;
        bytes.extend_from_slice(&read.records.read_bytes().unwrap());
    }
    (bytes, end)
}

fn endpoints(nodes: &[Node]) -> Vec<BrokerEndpoint> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| BrokerEndpoint {
            node_id: i as i32 + 1,
            host: "127.0.0.1".into(),
            port: i32::from(n.port),
            rack: None,
            listeners: Default::default(),
        })
        .collect()
}

/// Gives each node the metadata, serves it and starts its replication.
fn start(nodes: &[Node], runtime: &tokio::runtime::Runtime, topic: &TopicMetadata) {
    let brokers = endpoints(nodes);
    for n in nodes {
        start_one(n, &brokers, runtime, topic);
    }
}

fn start_one(
    n: &Node,
    brokers: &[BrokerEndpoint],
    runtime: &tokio::runtime::Runtime,
    topic: &TopicMetadata,
) {
    n.broker
        .apply_metadata(MetadataImage::new(
            "c".into(),
            1,
            0,
            brokers.to_vec(),
            vec![topic.clone()],
        ))
        .unwrap();
    // Before `serve`, which would otherwise start replication with the (absent) controller
    // channel.
    n.broker.start_replication(
        Arc::new(CommittingController),
        Arc::default(),
        runtime.handle().clone(),
    );
    let broker = Arc::clone(&n.broker);
    runtime.spawn(async move {
        let (bridge, _receiver) = Bridge::new(BTreeMap::new());
        broker.serve(bridge, None).await
    });
    let port = n.port;
    wait_until("the broker listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn stop(nodes: &[Node], runtime: tokio::runtime::Runtime) {
    for n in nodes {
        n.broker.shutdown();
    }
    runtime.shutdown_timeout(Duration::from_secs(10));
    for n in nodes {
        n.broker.close().unwrap();
    }
}

#[test]
fn a_follower_replicates_over_tcp_and_follows_the_new_leader_after_a_change() {
    let ports = [free_port(), free_port()];
    let nodes = [node(1, ports[0]), node(2, ports[1])];
    let runtime = runtime();
    start(&nodes, &runtime, &placement(1, 0));
    // acks=all is answered only once broker 2 has the batch.
    assert_eq!(produce(&nodes[0], &["a", "b", "c"]), (0, 0));
    let (leader, follower) = (partition(&nodes[0]), partition(&nodes[1]));
    assert_eq!(follower.log_end_offset(), 3);
    wait_until("the follower learns the high watermark", || {
        follower.high_watermark() == 3
    });
    assert_eq!(contents(&follower), contents(&leader));
    assert_eq!(
        bytes_out(&nodes[0]),
        0.0,
        "replication is not BytesOutPerSec"
    );

    // Broker 2 leads epoch 1; broker 1 now copies it.
    for n in &nodes {
        n.broker
            .apply_metadata_delta(&MetadataDelta {
                metadata_offset: 1,
                controller_id: 1,
                brokers: None,
                topics: vec![placement(2, 1)],
                deleted_topic_ids: Vec::new(),
                finalized_features: None,
                log_defaults: None,
            })
            .unwrap();
    }
    assert_eq!(produce(&nodes[0], &["x"]).0, 6, "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(produce(&nodes[1], &["d", "e"]), (0, 3));
    let (new_leader, new_follower) = (partition(&nodes[1]), partition(&nodes[0]));
    assert_eq!(new_follower.log_end_offset(), 5);
    wait_until("the old leader learns the high watermark", || {
        new_follower.high_watermark() == 5
    });
    assert_eq!(contents(&new_follower), contents(&new_leader));
    let followers = new_leader.follower_states();
    assert_eq!((followers[0].0, followers[0].1.log_end_offset), (1, 5));
    stop(&nodes, runtime);
}

/// A follower that stops fetching leaves the ISR after replica.lag.time.max.ms (the leader
/// sends the shrink to the controller), acks=all goes on with the others, and once the
/// follower is back and caught up it joins the ISR again.
#[test]
fn a_stopped_follower_leaves_the_isr_and_rejoins_once_caught_up() {
    let ports = [free_port(), free_port(), free_port()];
    let lag_ms = 1_000;
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| {
            node_in(
                tempfile::tempdir().unwrap(),
                i + 1,
                ports[i as usize],
                lag_ms,
            )
        })
        .collect();
    let runtime = runtime();
    let topic = placement_on(&[1, 2, 3], 1, 0);
    start(&nodes, &runtime, &topic);
    assert_eq!(produce(&nodes[0], &["a"]), (0, 0));
    let leader = partition(&nodes[0]);
    let isr = || leader.state().isr;

    let stopped = nodes.pop().unwrap();
    stopped.broker.shutdown();
    stopped.broker.close().unwrap();
    wait_until("broker 3 stops listening", || {
        std::net::TcpStream::connect(("127.0.0.1", ports[2])).is_err()
    });
    // Broker 3 holds this acks=all back until the leader drops it from the ISR.
    assert_eq!(produce(&nodes[0], &["b"]), (0, 1));
    assert_eq!(isr(), vec![1, 2]);

    nodes.push(node_in(stopped.dir, 3, ports[2], lag_ms));
    start_one(&nodes[2], &endpoints(&nodes), &runtime, &topic);
    wait_until("broker 3 rejoins the ISR", || isr().contains(&3));
    assert_eq!(contents(&partition(&nodes[2])).1, 2);
    stop(&nodes, runtime);
}

/// KIP-73 on the leader: partition 0 is in broker 1's leader.replication.throttled.replicas
/// and its leader rate is 1 B/s, so once its first fetch took one batch, broker 2 (out of the
/// ISR) gets no more records however often it fetches; a raised rate lets it catch up and join
/// the ISR.
#[test]
fn a_leader_throttle_holds_back_a_follower_out_of_the_isr_until_the_rate_is_raised() {
    let ports = [free_port(), free_port()];
    // One batch per fetch (KIP-74 sends the first batch whole).
    let one_batch = ReplicationSettings {
        replica_fetch_max_bytes: 1,
        ..test_replication()
    };
    let nodes = [
        node(1, ports[0]),
        node_with(tempfile::tempdir().unwrap(), 2, ports[1], one_batch),
    ];
    let runtime = runtime();
    let mut topic = with_isr(&[1, 2], &[1], 1, 0);
    topic.configs.insert(
        "leader.replication.throttled.replicas".into(),
        "0:1,0:3".into(),
    );
    nodes[0].broker.set_replication_throttled_rates(1, i64::MAX);
    let brokers = endpoints(&nodes);
    start_one(&nodes[0], &brokers, &runtime, &topic);
    for (offset, value) in ["a", "b", "c"].into_iter().enumerate() {
        assert_eq!(
            produce_with_acks(&nodes[0], &[value], 1),
            (0, offset as i64)
        );
    }
    start_one(&nodes[1], &brokers, &runtime, &topic);
    let (leader, follower) = (partition(&nodes[0]), partition(&nodes[1]));
    wait_until("the first batch reaches broker 2", || {
        follower.log_end_offset() >= 1
    });
    let last_fetch = || leader.follower_states()[0].1.last_fetch_time_ms;
    let held_since = last_fetch();
    wait_until("broker 2 fetches again for a while", || {
        last_fetch() >= held_since + 1_000
    });
    assert_eq!(follower.log_end_offset(), 1);
    assert_eq!(leader.state().isr, vec![1]);
    let (bridge, _) = Bridge::new(BTreeMap::new());
    let metrics = nodes[0]
        .broker
        .metrics()
        .render(&*nodes[0].broker.server_context(bridge).replicas);
    let byte_rate = metrics
        .lines()
        .find_map(|line| line.strip_prefix("kafka_server_leaderreplication_byte_rate "))
        .map(|value| value.parse::<f64>().unwrap());
    assert!(byte_rate.is_some_and(|rate| rate > 1.0), "{byte_rate:?}");

    nodes[0]
        .broker
        .set_replication_throttled_rates(i64::MAX, i64::MAX);
    wait_until("broker 2 catches up and joins the ISR", || {
        leader.state().isr == vec![1, 2]
    });
    assert_eq!(follower.log_end_offset(), 3);
    stop(&nodes, runtime);
}

/// Takes a node down (serving and fetching) and waits until its port is free again.
fn take_down(node: Node) -> TempDir {
    node.broker.shutdown();
    node.broker.close().unwrap();
    wait_until("the broker stops listening", || {
        std::net::TcpStream::connect(("127.0.0.1", node.port)).is_err()
    });
    node.dir
}

/// KIP-101's divergence over TCP: the old leader's last record never reached the follower
/// that then led; coming back as a follower, its fetcher is told where its epoch ended,
/// truncates and copies the new leader's record at that offset.
#[test]
fn a_returning_leader_truncates_what_the_new_leader_never_had() {
    let ports = [free_port(), free_port()];
    let mut nodes = vec![node(1, ports[0]), node(2, ports[1])];
    let runtime = runtime();
    start(&nodes, &runtime, &placement(1, 0));
    assert_eq!(produce(&nodes[0], &["a"]), (0, 0));
    let dir2 = take_down(nodes.pop().unwrap());
    assert_eq!(produce_with_acks(&nodes[0], &["only on 1"], 1), (0, 1));
    let dir1 = take_down(nodes.pop().unwrap());

    // Broker 2 leads epoch 1 alone and writes its own record at offset 1.
    let new_leader = with_isr(&[1, 2], &[2], 2, 1);
    nodes.push(node_in(dir1, 1, ports[0], 30_000));
    nodes.push(node_in(dir2, 2, ports[1], 30_000));
    start_one(&nodes[1], &endpoints(&nodes), &runtime, &new_leader);
    assert_eq!(produce_with_acks(&nodes[1], &["c"], 1), (0, 1));
    start_one(&nodes[0], &endpoints(&nodes), &runtime, &new_leader);

    let (returning, leader) = (partition(&nodes[0]), partition(&nodes[1]));
    wait_until("the returning leader converges", || {
        returning.high_watermark() == 2 && contents(&returning) == contents(&leader)
    });
    stop(&nodes, runtime);
}

/// A follower whose fetch offset the leader no longer has (OFFSET_OUT_OF_RANGE) empties its
/// log and starts it at the leader's log start offset.
#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    let ports = [free_port(), free_port()];
    let nodes = vec![node(1, ports[0]), node(2, ports[1])];
    let runtime = runtime();
    let topic = with_isr(&[1, 2], &[1], 1, 0);
    // Broker 2 is down while the leader writes and deletes records.
    start_one(&nodes[0], &endpoints(&nodes), &runtime, &topic);
    for value in ["a", "b", "c"] {
        assert_eq!(produce_with_acks(&nodes[0], &[value], 1).0, 0);
    }
    let leader = partition(&nodes[0]);
    assert_eq!(leader.delete_records_on_leader(3).unwrap(), 3);
    assert_eq!(produce_with_acks(&nodes[0], &["d"], 1), (0, 3));

    start_one(&nodes[1], &endpoints(&nodes), &runtime, &topic);
    let follower = partition(&nodes[1]);
    wait_until("the follower copies from the leader's start", || {
        follower.log_end_offset() == 4
    });
    assert_eq!(follower.log_start_offset(), 3);
    wait_until("the follower joins the ISR", || {
        leader.state().isr.contains(&2)
    });
    stop(&nodes, runtime);
}

/// A coordinator's write (group offsets) is answered once the in-sync replicas have it, as
/// Kafka's acks=-1: with a follower of the ISR down it is not, and with it up it is on the
/// follower when the call returns.
#[test]
fn an_internal_append_returns_once_the_isr_has_it() {
    let ports = [free_port(), free_port()];
    let nodes = vec![node(1, ports[0]), node(2, ports[1])];
    let runtime = runtime();
    let topic = placement(1, 0);
    start_one(&nodes[0], &endpoints(&nodes), &runtime, &topic);
    let record = [(None, Some(bytes::Bytes::from_static(b"offset commit")))];
    let unreplicated = nodes[0].broker.internal_append("t", 0, &record, None);
    assert!(
        matches!(
            unreplicated,
            Err(krust_server::broker::InternalRecordsError::NotReplicated(_))
        ),
        "{unreplicated:?}"
    );

    start_one(&nodes[1], &endpoints(&nodes), &runtime, &topic);
    let base = nodes[0]
        .broker
        .internal_append("t", 0, &record, None)
        .unwrap();
    assert_eq!(base, 1);
    assert!(partition(&nodes[1]).log_end_offset() >= 2);
    stop(&nodes, runtime);
}
