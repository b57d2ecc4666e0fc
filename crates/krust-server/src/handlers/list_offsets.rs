//! ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::records::RecordBatchDecoder;

use crate::partition::Partition;
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
        timestamp => partition.offset_for_timestamp(timestamp).map(|found| {
            found.map(|f| exact_record(&partition, timestamp, (f.offset, f.timestamp)))
        }),
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

/// The storage finds the batch holding the first record at or after `timestamp` from batch
/// headers alone; inside a compressed batch that is the batch's start. Kafka answers with the
/// exact record, so decode that one batch (ListOffsets is not on the produce/fetch path).
fn exact_record(partition: &Partition, timestamp: i64, found: (i64, i64)) -> (i64, i64) {
    let Ok(mut records) = partition
        .read(found.0, 1, true)
        .and_then(|data| Ok(data.records.read_bytes()?))
    else {
        return found;
    };
    let Ok(sets) = RecordBatchDecoder::decode_all(&mut records) else {
        return found;
    };
    sets.into_iter()
        .flat_map(|set| set.records)
        .find(|r| r.offset >= found.0 && r.timestamp >= timestamp)
        .map_or(found, |r| (r.offset, r.timestamp))
}
