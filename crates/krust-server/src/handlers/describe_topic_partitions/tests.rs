//! DescribeTopicPartitions pagination and contents, on a hand-built metadata image.

use kafka_protocol::messages::describe_topic_partitions_request::{
    Cursor as RequestCursor, TopicRequest,
};

use super::*;
use crate::metadata::metadata_cache::{BrokerEndpoint, PartitionMetadata};

const LOCAL: i32 = 1;

fn topic(name: &str, partitions: i32, replicas: &[i32]) -> TopicMetadata {
    TopicMetadata {
        name: name.to_string(),
        topic_id: Uuid::from_u128(u128::from(name.as_bytes()[0])),
        internal: name.starts_with("__"),
        configs: Default::default(),
        partitions: (0..partitions)
            .map(|partition| PartitionMetadata {
                partition,
                leader: replicas[0],
                leader_epoch: 4,
                partition_epoch: 4,
                replicas: replicas.to_vec(),
                isr: replicas.to_vec(),
            })
            .collect(),
    }
}

fn image() -> MetadataImage {
    let broker = BrokerEndpoint {
        node_id: LOCAL,
        host: "localhost".into(),
        port: 9092,
        rack: None,
        listeners: Default::default(),
    };
    MetadataImage::new(
        "cluster".into(),
        LOCAL,
        0,
        vec![broker],
        vec![
            topic("b", 3, &[LOCAL]),
            topic("a", 2, &[LOCAL]),
            topic("c", 1, &[LOCAL, 2]),
        ],
    )
}

fn request(
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(topic_name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            RequestCursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        }))
}

fn online(_: &str, _: i32, _: i32) -> bool {
    false
}

/// (topic, partition indexes) per topic of a response, and its next cursor.
type Page = (Vec<(String, Vec<i32>)>, Option<(String, i32)>);

fn pages(response: &DescribeTopicPartitionsResponse) -> Page {
    let topics = response
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().unwrap().0.to_string();
            (
                name,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let cursor = response
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (topics, cursor)
}

#[test]
fn all_topics_are_paged_in_name_order_with_a_cursor() {
    let image = image();
    let first = describe_all(&image, &request(&[], 4, None), &online);
    assert_eq!(
        pages(&first),
        (
            vec![("a".into(), vec![0, 1]), ("b".into(), vec![0, 1])],
            Some(("b".into(), 2))
        )
    );
    let second = describe_all(&image, &request(&[], 4, Some(("b", 2))), &online);
    assert_eq!(
        pages(&second),
        (vec![("b".into(), vec![2]), ("c".into(), vec![0])], None)
    );
}

#[test]
fn a_page_that_ends_with_a_topic_points_at_the_next_one() {
    let response = describe_all(&image(), &request(&[], 2, None), &online);
    assert_eq!(
        pages(&response),
        (vec![("a".into(), vec![0, 1])], Some(("b".into(), 0)))
    );
}

#[test]
fn named_topics_report_unknown_and_invalid_names() {
    let response = describe_all(
        &image(),
        &request(&["c", "nope", "bad/name"], 100, None),
        &online,
    );
    let errors: Vec<(String, i16)> = response
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.error_code))
        .collect();
    assert_eq!(
        errors,
        vec![
            (
                "bad/name".into(),
                ResponseError::InvalidTopicException.code()
            ),
            ("c".into(), 0),
            ("nope".into(), ResponseError::UnknownTopicOrPartition.code()),
        ]
    );
    let c = &response.topics[1];
    assert_eq!(
        c.topic_authorized_operations,
        all_operations(TOPIC_OPERATIONS)
    );
    let p = &c.partitions[0];
    assert_eq!(p.leader_id, BrokerId(LOCAL));
    assert_eq!(p.leader_epoch, 4);
    assert_eq!(p.isr_nodes, vec![BrokerId(LOCAL), BrokerId(2)]);
    // Broker 2 is not registered: its replica is offline.
    assert_eq!(p.offline_replicas, vec![BrokerId(2)]);
    assert_eq!(p.eligible_leader_replicas, Some(Vec::new()));
}

#[test]
fn a_replica_in_a_failed_log_dir_is_offline() {
    let response = describe_all(
        &image(),
        &request(&["a"], 100, None),
        &|topic, partition, broker| topic == "a" && partition == 1 && broker == LOCAL,
    );
    let offline: Vec<Vec<BrokerId>> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.offline_replicas.clone())
        .collect();
    assert_eq!(offline, vec![vec![], vec![BrokerId(LOCAL)]]);
}

#[test]
fn a_cursor_outside_the_requested_topics_is_an_invalid_request() {
    let response = describe_all(&image(), &request(&["a"], 10, Some(("b", 0))), &online);
    assert_eq!(response.topics.len(), 1);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::InvalidRequest.code()
    );
    let response = describe_all(&image(), &request(&[], 10, Some(("a", -1))), &online);
    assert!(response.topics.is_empty());
    assert!(response.next_cursor.is_none());
}

#[test]
fn the_limit_is_at_least_one_and_at_most_kafkas_cap() {
    let response = describe_all(&image(), &request(&["b"], 0, None), &online);
    assert_eq!(pages(&response).0, vec![("b".into(), vec![0])]);
    assert_eq!(all_operations(TOPIC_OPERATIONS), 3576);
}

fn describe_all(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    offline_dir: OfflineDir<'_>,
) -> DescribeTopicPartitionsResponse {
    describe(image, request, &TopicAuthorization::default(), offline_dir)
}

#[test]
fn topics_one_may_not_describe_are_refused_when_named_and_left_out_otherwise() {
    let authorized = TopicAuthorization {
        denied: HashSet::from(["b".to_string()]),
        operations: Some(HashMap::from([
            ("a".to_string(), 1 << 8),
            ("c".to_string(), 0),
        ])),
    };
    let all = describe(&image(), &request(&[], 100, None), &authorized, &online);
    let names: Vec<_> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(all.topics[0].topic_authorized_operations, 1 << 8);
    let named = describe(&image(), &request(&["b"], 100, None), &authorized, &online);
    assert_eq!(
        named.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert!(named.topics[0].partitions.is_empty());
}
