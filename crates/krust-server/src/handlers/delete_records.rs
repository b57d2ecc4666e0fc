//! DeleteRecords (KIP-107): moves partitions' log start offsets (low watermarks) forward.
//!
//! Records below the new start are gone from fetches at once and from disk with the next
//! retention pass. The log-start-offset checkpoint is written before answering, so the new
//! start survives a crash right after the response.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::authorizer::AclOperation;
use crate::handlers::denied_topics;
use crate::request::request_context::RequestContext;
use crate::server_context::ServerContext;

pub async fn handle(
    context: &ServerContext,
    request: DeleteRecordsRequest,
    ctx: &RequestContext<'_>,
) -> DeleteRecordsResponse {
    let image = context.metadata.image();
    let names = request.topics.iter().map(|t| t.name.0.as_str());
    let denied = denied_topics(context, ctx, AclOperation::Delete, names).await;
    let mut moved = false;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            // Kafka refuses DeleteRecords on internal topics (ReplicaManager.deleteRecords):
            // their records are the coordinators' state.
            let internal = image.topic(&name).is_some_and(|t| t.internal);
            let refused = denied.contains(&name);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if refused {
                        return result
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    if internal {
                        return result.with_error_code(ResponseError::InvalidTopicException.code());
                    }
                    let deleted = context
                        .replicas
                        .leader_partition(&name, p.partition_index)
                        .and_then(|partition| {
                            partition
                                .delete_records_on_leader(p.offset)
                                .map_err(|e| e.kafka_error_code())
                        });
                    match deleted {
                        Ok(low_watermark) => {
                            moved = true;
                            result.with_low_watermark(low_watermark)
                        }
                        Err(code) => result.with_error_code(code),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    if moved {
        ctx.park();
        let replicas = context.replicas.clone();
        if let Err(error) = tokio::task::spawn_blocking(move || replicas.checkpoint()).await {
            tracing::error!("writing checkpoints after DeleteRecords failed: {error}");
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
