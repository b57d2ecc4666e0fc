//! InitProducerId: idempotent producers get an id here; a transactional id goes to the
//! transaction coordinator (Python, `krust.transaction`), which owns its producer id and epoch.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::authorizer::{AclOperation, Action, ResourceType};
use crate::request::request_context::RequestContext;
use crate::server_context::ServerContext;

pub async fn handle(
    context: &ServerContext,
    request: InitProducerIdRequest,
    ctx: &RequestContext<'_>,
) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if let Some(refused) = authorization_error(context, &request, ctx).await {
        return response.with_error_code(refused.code());
    }
    if request.transactional_id.is_some() {
        ctx.park();
        return match context.bridge.call_internal(&request, ctx.version()).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(
                    "the transaction coordinator did not answer InitProducerId: {error}"
                );
                response.with_error_code(ResponseError::CoordinatorNotAvailable.code())
            }
        };
    }
    // KIP-360: a producer that already has an id may bump its epoch instead of taking a new id.
    let existing = request.producer_id.0;
    let epoch = request.producer_epoch;
    if existing >= 0 && (0..i16::MAX - 1).contains(&epoch) {
        return response
            .with_producer_id(ProducerId(existing))
            .with_producer_epoch(epoch + 1);
    }
    // A new block of ids is asked of the controller, in Python.
    ctx.park();
    match context
        .producer_ids
        .next_producer_id(context.controller_channels.as_ref(), &context.bridge)
        .await
    {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(error) => {
            tracing::warn!("cannot allocate a producer id: {error}");
            response.with_error_code(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}

/// As Kafka: a transactional producer needs WRITE on its transactional id; an idempotent one
/// IDEMPOTENT_WRITE on the cluster or WRITE on at least one topic.
async fn authorization_error(
    context: &ServerContext,
    request: &InitProducerIdRequest,
    ctx: &RequestContext<'_>,
) -> Option<ResponseError> {
    let authorizer = context.authorizer.as_ref()?;
    if let Some(id) = &request.transactional_id {
        let action = Action::new(
            AclOperation::Write,
            ResourceType::TransactionalId,
            id.0.as_str(),
        );
        return (!authorizer.allows(ctx, action).await)
            .then_some(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let actions = [
        Action::on_cluster(AclOperation::IdempotentWrite),
        Action::any_of_type(AclOperation::Write, ResourceType::Topic),
    ];
    let allowed = authorizer.authorize(ctx, &actions).await.contains(&true);
    (!allowed).then_some(ResponseError::ClusterAuthorizationFailed)
}
