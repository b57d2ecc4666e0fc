//! Produce: validate and append each partition's batches; acks=all waits for the high watermark.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use krust_storage::AppendError;

use crate::clock::now_ms;
use crate::partition::{Partition, PartitionError};
use crate::purgatory::await_high_watermarks;
use crate::request_context::RequestContext;
use crate::server_context::ServerContext;

/// Kafka's message when a client produces to an internal topic (its ReplicaManager's).
const INTERNAL_TOPIC_MESSAGE: &str = "Cannot append to internal topic";

/// Handles a Produce request; `None` for acks=0, which Kafka never answers.
pub async fn handle(
    context: &ServerContext,
    request: ProduceRequest,
    ctx: &RequestContext<'_>,
) -> Option<ProduceResponse> {
    let version = ctx.version();
    let now_ms = now_ms();
    let image = context.metadata.image();
    let mut waits: Vec<(Arc<Partition>, i64)> = Vec::new();
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        // Only coordinators write internal topics (Broker::internal_append), never clients:
        // a forged record there would be loaded as group state.
        let internal = image.topic(&name).is_some_and(|t| t.internal);
        let partitions = topic
            .partition_data
            .iter()
            .map(|data| {
                if internal {
                    return error_response(data.index, ResponseError::InvalidTopicException)
                        .with_error_message(Some(StrBytes::from_static_str(
                            INTERNAL_TOPIC_MESSAGE,
                        )));
                }
                let partition = match context.replicas.leader_partition(&name, data.index) {
                    Ok(partition) => partition,
                    Err(code) => return error_code_response(data.index, code),
                };
                let Some(records) = &data.records else {
                    return error_response(data.index, ResponseError::InvalidRecord);
                };
                match partition.append_as_leader(records, now_ms) {
                    Ok(info) => {
                        if request.acks == -1 {
                            waits.push((partition.clone(), info.last_offset + 1));
                        }
                        let response = PartitionProduceResponse::default()
                            .with_index(data.index)
                            .with_base_offset(info.first_offset)
                            .with_log_append_time_ms(info.log_append_time);
                        if version >= 5 {
                            response.with_log_start_offset(info.log_start_offset)
                        } else {
                            response
                        }
                    }
                    Err(error) => {
                        tracing::debug!("produce to {name}-{} rejected: {error}", data.index);
                        rejected_response(data.index, &error, version)
                    }
                }
            })
            .collect();
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if request.acks == 0 {
        return None;
    }
    if !waits.is_empty() {
        ctx.park();
        let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
        if !await_high_watermarks(&waits, timeout).await {
            mark_timed_out(&mut responses, &waits);
        }
    }
    Some(ProduceResponse::default().with_responses(responses))
}

fn error_response(index: i32, error: ResponseError) -> PartitionProduceResponse {
    error_code_response(index, error.code())
}

fn error_code_response(index: i32, error_code: i16) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

/// A refused append; records refused one by one are listed as Kafka lists them (Produce v8+).
fn rejected_response(index: i32, error: &PartitionError, version: i16) -> PartitionProduceResponse {
    let response = error_code_response(index, error.kafka_error_code());
    let PartitionError::Append(AppendError::InvalidRecords {
        record_errors,
        message,
    }) = error
    else {
        return response;
    };
    if version < 8 {
        return response;
    }
    let record_errors = record_errors
        .iter()
        .map(|e| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(e.batch_index)
                .with_batch_index_error_message(Some(StrBytes::from_string(e.message.clone())))
        })
        .collect();
    response
        .with_record_errors(record_errors)
        .with_error_message(Some(StrBytes::from_string(message.clone())))
}

/// Partitions whose high watermark did not reach the append in time answer REQUEST_TIMED_OUT.
fn mark_timed_out(responses: &mut [TopicProduceResponse], waits: &[(Arc<Partition>, i64)]) {
    for (partition, required) in waits {
        if partition.high_watermark() >= *required {
            continue;
        }
        let tp = &partition.topic_partition;
        for topic in responses.iter_mut() {
            if topic.name.0.as_str() != tp.topic {
                continue;
            }
            for response in topic.partition_responses.iter_mut() {
                if response.index == tp.partition && response.error_code == 0 {
                    response.error_code = ResponseError::RequestTimedOut.code();
                }
            }
        }
    }
}
