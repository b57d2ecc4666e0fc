//! ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups, plus the
//! tiered-storage targets (KIP-405, KIP-1005, KIP-1023), answered as Kafka does for a log with
//! no remote storage.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;

use crate::partition::{FetchIsolation, LastFetchable};
use crate::server_context::ServerContext;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// The version whose wire format a request or response of `version` has: v11 (KIP-1023) only
/// allows a new target timestamp, its frame is v10's byte for byte.
pub fn codec_version(version: i16) -> i16 {
    version.min(10)
}

/// Kafka's ReplicaManager: the first version that may ask for each special timestamp.
fn min_version_for(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        EARLIEST_PENDING_UPLOAD => Some(11),
        t if t >= 0 => Some(0),
        _ => None,
    }
}

/// Answers a ListOffsets; topics in `denied` (no DESCRIBE) get TOPIC_AUTHORIZATION_FAILED.
pub fn handle(
    context: &ServerContext,
    request: ListOffsetsRequest,
    version: i16,
    denied: &HashSet<String>,
) -> ListOffsetsResponse {
    // Kafka's CONSUMER_REPLICA_ID is -1; a follower or a debugging tool gives another id and
    // may see up to the log end, a consumer up to what its isolation level allows.
    let last_fetchable = if request.replica_id.0 != -1 {
        LastFetchable::LogEnd
    } else {
        LastFetchable::Consumer(FetchIsolation::from_isolation_level(
            request.isolation_level,
        ))
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    if denied.contains(&name) {
                        return ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            .with_offset(-1)
                            .with_timestamp(-1);
                    }
                    lookup(
                        context,
                        &name,
                        p.partition_index,
                        p.timestamp,
                        version,
                        last_fetchable,
                    )
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(
    context: &ServerContext,
    topic: &str,
    index: i32,
    timestamp: i64,
    version: i16,
    last_fetchable: LastFetchable,
) -> ListOffsetsPartitionResponse {
    let response = ListOffsetsPartitionResponse::default().with_partition_index(index);
    if min_version_for(timestamp).is_none_or(|min| version < min) {
        return response
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_offset(-1)
            .with_timestamp(-1);
    }
    let partition = match context.replicas.leader_partition(topic, index) {
        Ok(partition) => partition,
        Err(code) => return response.with_error_code(code),
    };
    let found = match timestamp {
        // As Kafka: the high watermark, the last stable offset under read_committed, the log
        // end for a replica.
        LATEST => Ok(Some((partition.last_fetchable_offset(last_fetchable), -1))),
        // Without remote storage the local log starts where the log does.
        EARLIEST | EARLIEST_LOCAL => Ok(Some((partition.log_start_offset(), -1))),
        // Nothing is tiered: Kafka answers offset -1.
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok(Some((-1, -1))),
        MAX_TIMESTAMP => partition
            .offset_of_max_timestamp(last_fetchable)
            .map(|found| found.map(|f| (f.offset, f.timestamp))),
        // The storage walks the records (decompressing with bounded memory) to the exact one.
        timestamp => partition
            .offset_for_timestamp(timestamp, last_fetchable)
            .map(|found| found.map(|f| (f.offset, f.timestamp))),
    };
    match found {
        Ok(Some((offset, found_timestamp))) => {
            let response = response.with_offset(offset).with_timestamp(found_timestamp);
            let untiered = matches!(timestamp, LATEST_TIERED | EARLIEST_PENDING_UPLOAD);
            if version >= 4 && !untiered {
                response.with_leader_epoch(partition.leader_epoch())
            } else {
                response
            }
        }
        // No record at or after the timestamp: Kafka answers offset -1.
        Ok(None) => response.with_offset(-1).with_timestamp(-1),
        Err(error) => response.with_error_code(error.kafka_error_code()),
    }
}
