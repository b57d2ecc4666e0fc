//! Produce: validate and append each partition's batches; acks=all waits for the high watermark.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use krust_storage::batch::BatchHeader;
use krust_storage::AppendError;

use crate::authorizer::{AclOperation, Action, ResourceType};
use crate::clock::now_ms;
use crate::handlers::throttling::charge;
use crate::metadata::metadata_cache::MetadataImage;
use crate::partition::verification::VerificationGuard;
use crate::partition::{Partition, PartitionError};
use crate::quota::ClientQuotaType;
use crate::replica::purgatory::await_produce_acks;
use crate::request::request_context::{respond, Outcome, RequestContext};
use crate::server_context::ServerContext;
use crate::transaction::transaction_verification::{verify, Coordinators, Unverified};

/// Kafka's message when a client produces to an internal topic (its ReplicaManager's).
const INTERNAL_TOPIC_MESSAGE: &str = "Cannot append to internal topic";

/// Handles a Produce request; acks=0 gets no answer.
pub async fn handle(
    context: &ServerContext,
    request: ProduceRequest,
    ctx: &RequestContext<'_>,
) -> Outcome {
    let version = ctx.version();
    let now_ms = now_ms();
    let image = context.metadata.image();
    let mut waits: Vec<(Arc<Partition>, i64)> = Vec::new();
    let mut responses = Vec::with_capacity(request.topic_data.len());
    // Kafka's ReplicaManager answers any other acks with INVALID_REQUIRED_ACKS, writing nothing.
    let valid_acks = matches!(request.acks, -1..=1);
    let (transaction_denied, denied) = authorize(context, &request, ctx, &image).await;
    let verification = if transaction_denied {
        Verification::default()
    } else {
        verify_transaction(context, &request, ctx, &image).await
    };
    for topic in request.topic_data {
        let (name, unknown_id) = topic_name(&topic, version, &image);
        // Only coordinators write internal topics (Broker::internal_append), never clients:
        // a forged record there would be loaded as group state.
        let internal = image.topic(&name).is_some_and(|t| t.internal);
        let partitions = topic
            .partition_data
            .iter()
            .map(|data| {
                if unknown_id {
                    return error_response(data.index, ResponseError::UnknownTopicId);
                }
                if transaction_denied {
                    return error_response(
                        data.index,
                        ResponseError::TransactionalIdAuthorizationFailed,
                    );
                }
                if denied.contains(&name) {
                    return error_response(data.index, ResponseError::TopicAuthorizationFailed);
                }
                if internal {
                    context.metrics.topics.record_refused_produce();
                    return error_response(data.index, ResponseError::InvalidTopicException)
                        .with_error_message(Some(StrBytes::from_static_str(
                            INTERNAL_TOPIC_MESSAGE,
                        )));
                }
                let partition = context.replicas.leader_partition(&name, data.index);
                // As Kafka: a partition the metadata knows gets INVALID_REQUIRED_ACKS whether
                // or not its log is there yet (the applier may still be creating it).
                let known = || {
                    image
                        .topic(&name)
                        .and_then(|t| t.partition(data.index))
                        .is_some()
                };
                if !valid_acks && (partition.is_ok() || known()) {
                    return error_response(data.index, ResponseError::InvalidRequiredAcks);
                }
                let partition = match partition {
                    Ok(partition) => partition,
                    Err(code) => {
                        context.metrics.topics.record_refused_produce();
                        return error_code_response(data.index, code);
                    }
                };
                let verified = verification.of(&name, data.index);
                if let Some(Verified::Refused(code)) = verified {
                    context.metrics.topics.record_refused_produce();
                    return error_code_response(data.index, code);
                }
                let topic_metrics = partition.topic_metrics(&context.metrics.topics);
                let Some(records) = &data.records else {
                    let error = ResponseError::InvalidRecord.code();
                    topic_metrics.record_produce(error, 0, 0);
                    return error_code_response(data.index, error);
                };
                let appended = match verified {
                    Some(Verified::Guarded(guard)) => {
                        partition.append_verified(records, request.acks, now_ms, guard)
                    }
                    _ => partition.append_as_leader(records, request.acks, now_ms),
                };
                match appended {
                    Ok(info) => {
                        let messages = u64::try_from(info.record_count).unwrap_or(0);
                        topic_metrics.record_produce(0, records.len() as u64, messages);
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
                        topic_metrics.record_produce(error.kafka_error_code(), 0, 0);
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
    if !waits.is_empty() {
        ctx.park();
        let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
        let outcomes = await_produce_acks(&waits, timeout).await;
        mark_unacknowledged(&mut responses, &waits, &outcomes);
    }
    // As Kafka: an acks=0 produce counts against the byte rate but not the request time.
    let charge = charge(
        context,
        ctx,
        ClientQuotaType::Produce,
        ctx.size,
        request.acks != 0,
    );
    let throttle = charge.throttle(ctx);
    // Counted for acks=0 too, which gets no response.
    let requests = &context.metrics.requests;
    for partition in responses.iter().flat_map(|t| &t.partition_responses) {
        requests.record_error(ApiKey::Produce, partition.error_code);
    }
    if request.acks == 0 {
        // Kafka never answers acks=0, but closes the connection when a partition failed so
        // the producer notices (and refreshes its metadata).
        let failed = responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .any(|p| p.error_code != 0);
        return if failed {
            Outcome::Close("an acks=0 produce failed".to_string())
        } else {
            Outcome::NoResponse.throttled(throttle)
        };
    }
    let response = ProduceResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(charge.throttle_time_ms());
    respond(ctx, &response).throttled(throttle)
}

/// A topic's name and whether its id (v13+, KIP-516: topics by id only) is unknown.
fn topic_name(topic: &TopicProduceData, version: i16, image: &MetadataImage) -> (String, bool) {
    if version >= 13 {
        match image.topic_by_id(&topic.topic_id) {
            Some(t) => (t.name.clone(), false),
            None => (String::new(), true),
        }
    } else {
        (topic.name.0.to_string(), false)
    }
}

/// The outcome of KIP-890's verification of one partition.
#[derive(Clone, Copy)]
enum Verified {
    /// The coordinator did not confirm it: the error to answer.
    Refused(i16),
    /// Confirmed: appended only if the guard still holds.
    Guarded(VerificationGuard),
}

/// The partitions of a produce that were verified (none for most produces).
#[derive(Default)]
struct Verification(HashMap<(String, i32), Verified>);

impl Verification {
    fn of(&self, topic: &str, partition: i32) -> Option<Verified> {
        if self.0.is_empty() {
            return None;
        }
        self.0.get(&(topic.to_string(), partition)).copied()
    }
}

/// KIP-890: the partitions where a transactional batch would start a transaction are checked
/// with the transaction coordinator first.
async fn verify_transaction(
    context: &ServerContext,
    request: &ProduceRequest,
    ctx: &RequestContext<'_>,
    image: &MetadataImage,
) -> Verification {
    let Some(transactional_id) = &request.transactional_id else {
        return Verification::default();
    };
    let mut producer = None;
    let mut starting = Vec::new();
    let mut guards = HashMap::new();
    for topic in &request.topic_data {
        let (name, _) = topic_name(topic, ctx.version(), image);
        for data in &topic.partition_data {
            let header = data.records.as_deref().and_then(BatchHeader::parse);
            let Some(header) = header.filter(BatchHeader::is_transactional) else {
                continue;
            };
            let Ok(partition) = context.replicas.leader_partition(&name, data.index) else {
                continue;
            };
            let guard =
                partition.start_transaction_verification(header.producer_id, header.producer_epoch);
            if let Some(guard) = guard {
                producer.get_or_insert((header.producer_id, header.producer_epoch));
                starting.push((name.clone(), data.index));
                guards.insert((name.clone(), data.index), guard);
            }
        }
    }
    let Some((producer_id, producer_epoch)) = producer else {
        return Verification::default();
    };
    ctx.park();
    let producer = Unverified {
        transactional_id: transactional_id.0.as_str(),
        producer_id,
        producer_epoch,
    };
    let coordinators = Coordinators {
        node_id: context.settings.node_id,
        metadata: &context.metadata,
        bridge: &context.bridge,
        broker_channels: &context.broker_channels,
    };
    let refused = verify(&coordinators, &producer, &starting, ctx.version()).await;
    let verified = guards.into_iter().map(|(key, guard)| {
        let outcome = match refused.get(&key) {
            Some(code) => Verified::Refused(*code),
            None => Verified::Guarded(guard),
        };
        (key, outcome)
    });
    Verification(verified.collect())
}

/// As Kafka: a transactional produce needs WRITE on its transactional id (else every partition
/// fails), and each topic WRITE. Returns whether the transactional id was refused and the
/// refused topics.
async fn authorize(
    context: &ServerContext,
    request: &ProduceRequest,
    ctx: &RequestContext<'_>,
    image: &MetadataImage,
) -> (bool, HashSet<String>) {
    let Some(authorizer) = &context.authorizer else {
        return (false, HashSet::new());
    };
    if let Some(id) = &request.transactional_id {
        let action = Action::new(
            AclOperation::Write,
            ResourceType::TransactionalId,
            id.0.as_str(),
        );
        if !authorizer.allows(ctx, action).await {
            return (true, HashSet::new());
        }
    }
    let names: Vec<String> = request
        .topic_data
        .iter()
        .filter_map(|topic| {
            if ctx.version() >= 13 {
                image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
            } else {
                Some(topic.name.0.to_string())
            }
        })
        .collect();
    let denied = authorizer
        .denied(
            ctx,
            AclOperation::Write,
            ResourceType::Topic,
            names.iter().map(String::as_str),
        )
        .await;
    (false, denied)
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

/// A refused append, with Kafka's error message (Produce v8+) where it gives one: records
/// refused one by one are listed, and a too small ISR is explained.
fn rejected_response(index: i32, error: &PartitionError, version: i16) -> PartitionProduceResponse {
    let response = error_code_response(index, error.kafka_error_code());
    if version < 8 {
        return response;
    }
    match error {
        PartitionError::NotEnoughReplicas { .. } => {
            response.with_error_message(Some(StrBytes::from_string(error.to_string())))
        }
        PartitionError::Append(AppendError::InvalidRecords {
            record_errors,
            message,
        }) => {
            let record_errors = record_errors
                .iter()
                .map(|e| {
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(e.batch_index)
                        .with_batch_index_error_message(Some(StrBytes::from_string(
                            e.message.clone(),
                        )))
                })
                .collect();
            response
                .with_record_errors(record_errors)
                .with_error_message(Some(StrBytes::from_string(message.clone())))
        }
        _ => response,
    }
}

/// Partitions whose append was not acknowledged answer why: REQUEST_TIMED_OUT when the high
/// watermark did not reach it in time, else the DelayedProduce's error
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER).
fn mark_unacknowledged(
    responses: &mut [TopicProduceResponse],
    waits: &[(Arc<Partition>, i64)],
    outcomes: &[Option<Result<(), ResponseError>>],
) {
    for ((partition, _), outcome) in waits.iter().zip(outcomes) {
        let error = match outcome {
            Some(Ok(())) => continue,
            Some(Err(error)) => *error,
            None => ResponseError::RequestTimedOut,
        };
        let tp = &partition.topic_partition;
        for topic in responses.iter_mut() {
            // v13 responses carry the topic id instead of the name.
            let same_topic = if topic.topic_id.is_nil() {
                topic.name.0.as_str() == tp.topic
            } else {
                topic.topic_id == partition.topic_id
            };
            if !same_topic {
                continue;
            }
            for response in topic.partition_responses.iter_mut() {
                if response.index == tp.partition && response.error_code == 0 {
                    response.error_code = error.code();
                }
            }
        }
    }
}
