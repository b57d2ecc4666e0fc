//! Routes a request frame, by the routing table, to a native handler or across the bridge to
//! Python; an api not enabled for the session closes the connection, as in Kafka.

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::bridge::{BridgeCall, BridgeReply};
use crate::handlers::throttling::QuotaCharge;
use crate::handlers::{self, api_versions, NativeRequest};
use crate::network::forwarding;
use crate::request::request_context::{framed, parse_header, Outcome, RequestContext, RequestSlot};
use crate::request::response_frame::{encode_frame, frame_encoded_body};
use crate::request::routing::{Exposure, Handler};
use crate::security::session::Session;
use crate::server_context::ServerContext;

/// Handles one request frame (without its size prefix) of a connection with `session`.
pub async fn handle_request<'a>(
    context: &ServerContext,
    session: &'a Session,
    frame: Bytes,
    slot: RequestSlot<'a>,
) -> Outcome {
    let size = frame.len();
    if frame.len() >= 2 && krust_raft::wire::is_quorum_api(i16::from_be_bytes([frame[0], frame[1]]))
    {
        return quorum_rpc(context, session, frame).await;
    }
    let whole_frame = frame.clone();
    let (api_key, header, body) = match parse_header(frame) {
        Ok(parsed) => parsed,
        Err(reason) => return Outcome::Close(reason),
    };
    let version = header.request_api_version;
    let Some(route) = context.routes.route(session, api_key) else {
        return Outcome::Close(format!(
            "{api_key:?} is not enabled on listener {}",
            session.listener_name
        ));
    };
    if api_key == ApiKey::ApiVersions && version > route.max_version {
        // KIP-511: answer in v0 so the client can pick a version we both support.
        let body = api_versions::unsupported_version_response(context, session);
        return framed(encode_frame(header.correlation_id, 0, &body, 0, None));
    }
    if version < route.min_version || version > route.max_version {
        return Outcome::Close(format!("unsupported version {version} of {api_key:?}"));
    }
    let request = RequestContext::new(header, api_key, session, size, slot);
    if route.exposure == Exposure::Forwarded
        && context.controller_channels.is_some()
        && !session.is_internal()
        && !context.routes.on_controller_listener(session)
    {
        return forwarding::forward(context, &request, whole_frame).await;
    }
    if api_key == ApiKey::Envelope {
        return forwarding::handle_envelope(context, &request, body).await;
    }
    match route.handler {
        Handler::Python => forward_to_python(context, request, body).await,
        Handler::Native => match NativeRequest::decode(api_key, version, body) {
            Ok(decoded) => handlers::handle_native(context, &request, decoded).await,
            Err(reason) => Outcome::Close(reason),
        },
    }
}

/// A controller quorum RPC (docs/quorum.md): served on a controller listener once the quorum
/// is started; anywhere else the connection is closed, as for any api a listener does not
/// serve.
async fn quorum_rpc(context: &ServerContext, session: &Session, frame: Bytes) -> Outcome {
    if !context.routes.serves_quorum_rpcs(session) {
        return Outcome::Close(format!(
            "controller quorum requests are not enabled on listener {}",
            session.listener_name
        ));
    }
    let Some(quorum) = context.quorum.get() else {
        return Outcome::Close("the controller quorum is not started on this node".into());
    };
    let (api_key, version, correlation_id, body) = match krust_raft::network::parse_request(frame) {
        Ok(parsed) => parsed,
        Err(error) => return Outcome::Close(error.to_string()),
    };
    match quorum.serve_rpc(api_key, version, body).await {
        Ok(response) => Outcome::Respond(frame_encoded_body(correlation_id, 0, &response)),
        Err(error) => Outcome::Close(format!("controller quorum request {api_key}: {error}")),
    }
}

async fn forward_to_python(
    context: &ServerContext,
    request: RequestContext<'_>,
    body: Bytes,
) -> Outcome {
    let call = BridgeCall::from_client(&request.header, request.session, body);
    // Python may hold the request for long (a JoinGroup waits for its rebalance).
    request.park();
    match context.bridge.call(call).await {
        Ok(BridgeReply::Response { body, throttle_ms }) => {
            let header_version = request.api_key.response_header_version(request.version());
            let throttle = QuotaCharge { throttle_ms }.throttle(&request);
            Outcome::Respond(frame_encoded_body(
                request.header.correlation_id,
                header_version,
                &body,
            ))
            .throttled(throttle)
        }
        Ok(BridgeReply::CloseConnection) => {
            Outcome::Close(format!("{:?} request was rejected", request.api_key))
        }
        Err(error) => Outcome::Close(error.to_string()),
    }
}
