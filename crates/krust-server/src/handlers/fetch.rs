//! Fetch: slices of segment files for each partition, with incremental sessions (KIP-227) and
//! DelayedFetch (wait for `min_bytes` up to `max_wait_ms`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use krust_storage::{AbortedTxn, FileSlice};
use uuid::Uuid;

use crate::authorizer::{AclOperation, Action, ResourceType};
use crate::clock::now_ms;
use crate::fetch_session::{SessionContext, SessionPartition};
use crate::handlers::throttling;
use crate::metadata::metadata_cache::MetadataImage;
use crate::partition::{check_current_leader_epoch, FetchIsolation, FollowerFetch, Partition};
use crate::quota::ClientQuotaType;
use crate::replica::purgatory::NewDataWatch;
use crate::request::request_context::{respond, respond_with_records, Outcome, RequestContext};
use crate::request::response_frame::SplicedRecords;
use crate::server_context::ServerContext;

/// One partition to read, with what the client asked of it.
struct Wanted {
    request: SessionPartition,
    partition: Result<Arc<Partition>, i16>,
}

/// Answers a Fetch; the record bytes stay in the segment files until the frame is sent.
pub async fn handle(
    context: &ServerContext,
    request: FetchRequest,
    ctx: &RequestContext<'_>,
) -> Outcome {
    let version = ctx.version();
    let image = context.metadata.image();
    let requested = requested_partitions(&image, &request, version);
    let forgotten: Vec<(String, i32)> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let name = topic_name(&image, &t.topic, t.topic_id, version);
            t.partitions.iter().map(move |p| (name.clone(), *p))
        })
        .collect();
    let session = if version >= 7 {
        context.fetch_sessions.resolve(
            request.session_id,
            request.session_epoch,
            requested.clone(),
            &forgotten,
        )
    } else {
        SessionContext::Sessionless
    };
    let (session_id, targets, incremental) = match session {
        SessionContext::Error(code) => {
            let response = FetchResponse::default()
                .with_error_code(code)
                .with_session_id(request.session_id);
            return respond(ctx, &response);
        }
        SessionContext::Sessionless => (0, requested, false),
        SessionContext::Session {
            session_id,
            partitions,
            incremental,
        } => (session_id, partitions, incremental),
    };
    // Followers are not clients: no client quota applies to them (Kafka's isFromFollower).
    let follower_id = match request.replica_state.replica_id.0 {
        id if id >= 0 => id,
        _ => request.replica_id.0,
    };
    let from_follower = follower_id >= 0;
    let denied = match &context.authorizer {
        None => HashSet::new(),
        Some(authorizer) if from_follower => {
            // As Kafka: a follower needs CLUSTER_ACTION on the cluster instead of READ.
            let action = Action::on_cluster(AclOperation::ClusterAction);
            if authorizer.allows(ctx, action).await {
                HashSet::new()
            } else {
                targets.iter().map(|t| t.topic.clone()).collect()
            }
        }
        Some(authorizer) => {
            let names = targets
                .iter()
                .map(|t| t.topic.as_str())
                .filter(|n| !n.is_empty());
            authorizer
                .denied(ctx, AclOperation::Read, ResourceType::Topic, names)
                .await
        }
    };
    let wanted: Vec<Wanted> = targets
        .into_iter()
        .map(|request| {
            let partition = if denied.contains(&request.topic) {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else {
                locate(context, &image, &request, version)
            };
            Wanted { request, partition }
        })
        .collect();
    let max_bytes = if from_follower {
        usize::MAX
    } else {
        throttling::max_fetch_bytes(context, ctx)
    };
    let reader = if from_follower {
        Reader::Follower(follower_id)
    } else {
        Reader::Consumer(FetchIsolation::from_isolation_level(
            request.isolation_level,
        ))
    };
    let results = read_with_wait(context, ctx, &request, &wanted, max_bytes, reader).await;
    record_reads(context, &wanted, &results);
    if from_follower {
        record_leader_replication(context, &wanted, &results);
    }
    let responses = build_response(&wanted, results, incremental, version);
    // Recorded in the session only once the response is sent with its partitions.
    let sent: Option<Vec<(String, i32, i64, i64)>> = (session_id != 0).then(|| {
        responses
            .iter()
            .flat_map(|(name, _, partitions)| {
                partitions.iter().map(move |(p, _)| {
                    (
                        name.clone(),
                        p.partition_index,
                        p.high_watermark,
                        p.log_start_offset,
                    )
                })
            })
            .collect()
    });
    let max_records_len = responses
        .iter()
        .flat_map(|(_, _, partitions)| partitions.iter().map(|(_, records)| records.len()))
        .max()
        .unwrap_or(0);
    let mut spliced = match SplicedRecords::with_max_len(max_records_len) {
        Ok(spliced) => spliced,
        Err(error) => return Outcome::Close(format!("cannot map a fetch response: {error}")),
    };
    let response = FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(
            responses
                .into_iter()
                .map(|(name, topic_id, partitions)| {
                    FetchableTopicResponse::default()
                        .with_topic(TopicName(StrBytes::from_string(name)))
                        .with_topic_id(if version >= 13 { topic_id } else { Uuid::nil() })
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(data, records)| {
                                    data.with_records(Some(spliced.placeholder(records)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    if !from_follower {
        let size = response.compute_size(version).unwrap_or(0);
        let charge = throttling::charge(context, ctx, ClientQuotaType::Fetch, size, true);
        if charge.throttle_ms > 0 {
            // As Kafka: a throttled consumer gets no records, and they do not count against it.
            throttling::refund(context, ctx, ClientQuotaType::Fetch, size);
            let throttled = FetchResponse::default()
                .with_session_id(session_id)
                .with_throttle_time_ms(charge.throttle_time_ms());
            return respond(ctx, &throttled).throttled(charge.throttle(ctx));
        }
    }
    if let Some(sent) = sent {
        context.fetch_sessions.record_sent(session_id, &sent);
    }
    respond_with_records(ctx, &response, Some(spliced))
}

/// The topic's name: from the request before v13, from its id from v13 on ("" if unknown).
fn topic_name(image: &MetadataImage, name: &TopicName, id: Uuid, version: i16) -> String {
    if version >= 13 {
        image
            .topic_by_id(&id)
            .map(|t| t.name.clone())
            .unwrap_or_default()
    } else {
        name.0.to_string()
    }
}

fn requested_partitions(
    image: &MetadataImage,
    request: &FetchRequest,
    version: i16,
) -> Vec<SessionPartition> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            let name = topic_name(image, &t.topic, t.topic_id, version);
            let topic_id = t.topic_id;
            t.partitions.iter().map(move |p| SessionPartition {
                topic: name.clone(),
                topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                log_start_offset: p.log_start_offset,
                last_sent: None,
            })
        })
        .collect()
}

fn locate(
    context: &ServerContext,
    image: &MetadataImage,
    request: &SessionPartition,
    version: i16,
) -> Result<Arc<Partition>, i16> {
    if request.topic.is_empty() && version >= 13 {
        return Err(ResponseError::UnknownTopicId.code());
    }
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    if image.topic(&request.topic).is_none() {
        return Err(unknown);
    }
    context
        .replicas
        .leader_partition(&request.topic, request.partition)
}

/// Who reads: a follower (to the log end) or a consumer at its isolation level.
#[derive(Clone, Copy)]
enum Reader {
    Follower(i32),
    Consumer(FetchIsolation),
}

/// What one read of one partition produced.
#[derive(Default)]
struct ReadResult {
    error_code: i16,
    records: Option<FileSlice>,
    /// A read_committed consumer's: the aborted transactions its records overlap.
    aborted_transactions: Option<Vec<AbortedTxn>>,
    /// A follower's read: the leader's high watermark and log start offset, and where the
    /// follower's log diverged.
    follower: Option<FollowerAnswer>,
}

struct FollowerAnswer {
    high_watermark: i64,
    log_start_offset: i64,
    diverging_epoch: Option<(i32, i64)>,
}

impl ReadResult {
    fn error(error_code: i16) -> Self {
        ReadResult {
            error_code,
            ..ReadResult::default()
        }
    }
}

/// Reads every partition, waiting (DelayedFetch) while fewer than min_bytes are available.
async fn read_with_wait(
    context: &ServerContext,
    ctx: &RequestContext<'_>,
    request: &FetchRequest,
    wanted: &[Wanted],
    quota_max_bytes: usize,
    reader: Reader,
) -> Vec<ReadResult> {
    let min_bytes = (request.min_bytes.max(0) as usize).min(quota_max_bytes);
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let watched: Vec<Arc<Partition>> = wanted
        .iter()
        .filter_map(|w| w.partition.as_ref().ok().cloned())
        .collect();
    // A read_committed consumer waits on the high watermark too: the last stable offset
    // only moves when it does (a marker counts once replicated).
    let mut new_data = NewDataWatch::new(&watched, matches!(reader, Reader::Follower(_)));
    loop {
        // What a read_committed read returns is already cut at the last stable offset, so
        // min_bytes counts only what it may see.
        let results = read_once(context, request, wanted, quota_max_bytes, reader);
        let bytes: usize = results
            .iter()
            .map(|r| r.records.as_ref().map_or(0, FileSlice::len))
            .sum();
        // An error or a diverged follower is answered at once, as Kafka does.
        let has_error = results.iter().any(|r| {
            r.error_code != 0
                || r.follower
                    .as_ref()
                    .is_some_and(|a| a.diverging_epoch.is_some())
        });
        let now = Instant::now();
        if has_error || bytes >= min_bytes || now >= deadline {
            return results;
        }
        ctx.park();
        new_data.wait(deadline - now).await;
    }
}

fn read_once(
    context: &ServerContext,
    request: &FetchRequest,
    wanted: &[Wanted],
    quota_max_bytes: usize,
    reader: Reader,
) -> Vec<ReadResult> {
    let mut remaining = if request.max_bytes > 0 {
        request.max_bytes as usize
    } else {
        usize::MAX
    }
    .min(quota_max_bytes);
    let mut any_data = false;
    wanted
        .iter()
        .map(|w| {
            let partition = match &w.partition {
                Ok(p) => p,
                Err(code) => return ReadResult::error(*code),
            };
            let max_bytes = (w.request.max_bytes.max(0) as usize).min(remaining);
            // KIP-74: the first batch of the response is sent whole even if over the limits.
            let result = match reader {
                Reader::Follower(replica_id) => read_for_follower(
                    context, partition, &w.request, replica_id, max_bytes, !any_data,
                ),
                Reader::Consumer(isolation) => {
                    read_for_consumer(partition, &w.request, max_bytes, !any_data, isolation)
                }
            };
            let read = result.records.as_ref().map_or(0, FileSlice::len);
            remaining = remaining.saturating_sub(read);
            any_data |= read > 0;
            result
        })
        .collect()
}

fn read_for_consumer(
    partition: &Partition,
    request: &SessionPartition,
    max_bytes: usize,
    min_one_batch: bool,
    isolation: FetchIsolation,
) -> ReadResult {
    // A partition that stopped leading while the fetch waited is refused, as Kafka's
    // DelayedFetch does.
    let checked = partition.check_leader_for_clients().and_then(|()| {
        check_current_leader_epoch(request.current_leader_epoch, partition.leader_epoch())
    });
    if let Err(error) = checked {
        return ReadResult::error(error.kafka_error_code());
    }
    match partition.read(request.fetch_offset, max_bytes, min_one_batch, isolation) {
        Ok(read) => ReadResult {
            records: Some(read.data.records),
            aborted_transactions: read.aborted_transactions,
            ..ReadResult::default()
        },
        Err(error) => ReadResult::error(error.kafka_error_code()),
    }
}

/// A follower's read: up to the log end, recording its progress (an ISR expansion it calls
/// for goes to the controller).
fn read_for_follower(
    context: &ServerContext,
    partition: &Arc<Partition>,
    request: &SessionPartition,
    replica_id: i32,
    max_bytes: usize,
    min_one_batch: bool,
) -> ReadResult {
    let fetch = FollowerFetch {
        replica_id,
        fetch_offset: request.fetch_offset,
        log_start_offset: request.log_start_offset,
        current_leader_epoch: request.current_leader_epoch,
        last_fetched_epoch: request.last_fetched_epoch,
        max_bytes,
        min_one_batch,
    };
    let now = now_ms();
    match partition.fetch_for_follower(&fetch, now) {
        Ok(read) => {
            if let Some(change) = read.isr_change {
                context
                    .replicas
                    .submit_isr_change(Arc::clone(partition), change);
            }
            // Kafka's shouldLeaderThrottle: the follower's progress is recorded above, but a
            // throttled replica out of sync gets no records while the leader quota is spent.
            let tp = &partition.topic_partition;
            let throttled = context
                .replicas
                .replication_quotas()
                .leader
                .should_throttle(&tp.topic, tp.partition, read.in_sync, now);
            ReadResult {
                error_code: 0,
                records: Some(if throttled {
                    FileSlice::empty()
                } else {
                    read.records
                }),
                aborted_transactions: None,
                follower: Some(FollowerAnswer {
                    high_watermark: read.high_watermark,
                    log_start_offset: read.log_start_offset,
                    diverging_epoch: read.diverging_epoch,
                }),
            }
        }
        Err(error) => ReadResult::error(error.kafka_error_code()),
    }
}

/// BrokerTopicMetrics and ErrorsPerSec of the reads this fetch answers with.
fn record_reads(context: &ServerContext, wanted: &[Wanted], results: &[ReadResult]) {
    let requests = &context.metrics.requests;
    for (w, result) in wanted.iter().zip(results) {
        requests.record_error(ApiKey::Fetch, result.error_code);
        match &w.partition {
            Ok(partition) => {
                // As Kafka: a follower's bytes are replication traffic, not BytesOutPerSec.
                let bytes = match result.follower {
                    Some(_) => 0,
                    None => result.records.as_ref().map_or(0, FileSlice::len),
                };
                partition
                    .topic_metrics(&context.metrics.topics)
                    .record_fetch(result.error_code, bytes as u64);
            }
            Err(_) => context.metrics.topics.record_refused_fetch(),
        }
    }
}

/// Kafka's leader quota record: the bytes sent of every throttled partition, in sync or not.
fn record_leader_replication(context: &ServerContext, wanted: &[Wanted], results: &[ReadResult]) {
    let quota = &context.replicas.replication_quotas().leader;
    let bytes: usize = wanted
        .iter()
        .zip(results)
        .filter(|(w, _)| quota.is_throttled(&w.request.topic, w.request.partition))
        .map(|(_, r)| r.records.as_ref().map_or(0, FileSlice::len))
        .sum();
    quota.record(bytes, now_ms());
}

/// Per topic: its name, its id and each partition's response with its records, in order.
type TopicResponses = Vec<(String, Uuid, Vec<(PartitionData, FileSlice)>)>;

fn build_response(
    wanted: &[Wanted],
    results: Vec<ReadResult>,
    incremental: bool,
    version: i16,
) -> TopicResponses {
    let mut topics: TopicResponses = Vec::new();
    for (w, result) in wanted.iter().zip(results) {
        let (hw, log_start) = match (&result.follower, &w.partition) {
            (Some(answer), _) => (answer.high_watermark, answer.log_start_offset),
            (None, Ok(p)) => (p.high_watermark(), p.log_start_offset()),
            (None, Err(_)) => (-1, -1),
        };
        // Read after the high watermark: never report it past the one answered.
        let last_stable_offset = match &w.partition {
            Ok(p) => p.last_stable_offset().min(hw),
            Err(_) => -1,
        };
        let has_records = result.records.as_ref().is_some_and(|r| !r.is_empty());
        let changed = w.request.last_sent != Some((hw, log_start));
        if incremental && result.error_code == 0 && !has_records && !changed {
            continue;
        }
        let data = PartitionData::default()
            .with_partition_index(w.request.partition)
            .with_error_code(result.error_code)
            .with_high_watermark(hw)
            .with_last_stable_offset(last_stable_offset)
            .with_aborted_transactions(result.aborted_transactions.map(|aborted| {
                aborted
                    .into_iter()
                    .map(|txn| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(txn.producer_id))
                            .with_first_offset(txn.first_offset)
                    })
                    .collect()
            }))
            .with_log_start_offset(if version >= 5 { log_start } else { -1 })
            .with_preferred_read_replica(BrokerId(-1));
        let diverging = result.follower.as_ref().and_then(|a| a.diverging_epoch);
        let data = match diverging {
            Some((epoch, end_offset)) if version >= 12 => data.with_diverging_epoch(
                EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset),
            ),
            _ => data,
        };
        let data = (data, result.records.unwrap_or_else(FileSlice::empty));
        match topics
            .iter_mut()
            .find(|(name, _, _)| *name == w.request.topic)
        {
            Some((_, _, partitions)) => partitions.push(data),
            None => topics.push((w.request.topic.clone(), w.request.topic_id, vec![data])),
        }
    }
    topics
}
