//! ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::server_context::ServerContext;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

pub fn handle(
    context: &ServerContext,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| lookup(context, &name, p.partition_index, p.timestamp, version))
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
) -> ListOffsetsPartitionResponse {
    let response = ListOffsetsPartitionResponse::default().with_partition_index(index);
    let partition = match context.replicas.leader_partition(topic, index) {
        Ok(partition) => partition,
        Err(code) => return response.with_error_code(code),
    };
    let found = match timestamp {
        LATEST => Ok(Some((partition.high_watermark(), -1))),
        EARLIEST => Ok(Some((partition.log_start_offset(), -1))),
        MAX_TIMESTAMP => partition
            .offset_of_max_timestamp()
            .map(|found| found.map(|f| (f.offset, f.timestamp))),
        // The storage walks the records (decompressing with bounded memory) to the exact one.
        timestamp => partition
            .offset_for_timestamp(timestamp)
            .map(|found| found.map(|f| (f.offset, f.timestamp))),
    };
    match found {
        Ok(Some((offset, timestamp))) => {
            let response = response.with_offset(offset).with_timestamp(timestamp);
            if version >= 4 {
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
