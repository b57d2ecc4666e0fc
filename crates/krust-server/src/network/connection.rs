//! One client connection: size-prefixed frames in, responses out, strictly in request order.
//!
//! Like Kafka, a connection's next request is read only after the previous one is answered,
//! so responses are in request order and a client may pipeline freely (its requests wait in the
//! socket buffer). `queued.max.requests` bounds the complete requests being handled
//! broker-wide: a frame takes a slot once it has fully arrived and gives it back when it is
//! answered or parks (see `RequestSlot`). When all slots are taken, connections with a complete
//! request wait (back-pressure), nothing is dropped; partial frames never hold a slot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use tokio::sync::watch;

use crate::metrics::RequestTimes;
use crate::network::authenticate::{authenticate, Reauthentication};
use crate::network::client_software::client_software;
use crate::network::dispatch::handle_request;
use crate::network::receive::{receive_frame, ReceiveError};
use crate::network::request_log::{log_completed, RequestHeaderView};
use crate::network::transport::Transport;
use crate::request::request_context::{Outcome, RequestSlot};
use crate::security::sasl::SaslSettings;
use crate::security::session::Session;
use crate::server_context::ServerContext;

/// Serves one connection until the client closes it, it idles out, it misbehaves, or the
/// broker shuts down (after answering the request in flight). On a SASL listener (`sasl`)
/// the client must authenticate first; its principal is the session's from then on.
pub async fn serve_connection<S: Transport>(
    mut stream: S,
    mut session: Session,
    sasl: Option<&SaslSettings>,
    context: Arc<ServerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = session.client_address;
    let mut session_deadline = None;
    if let Some(sasl) = sasl {
        let authenticated = tokio::select! {
            authenticated = authenticate(&mut stream, &mut session, &context, sasl, None) => authenticated,
            _ = shutdown.changed() => return,
        };
        match authenticated {
            Ok(principal) => session.principal = principal,
            Err(error) => {
                tracing::info!("closing connection from {peer}: {error}");
                return;
            }
        }
        session_deadline = sasl.session_deadline();
    }
    let idle = Duration::from_millis(context.settings.connections_max_idle_ms);
    let max_request = context.settings.socket_request_max_bytes;
    // KIP-219: a throttled client's connection is not read until its throttle time is over.
    let mut muted_until: Option<Instant> = None;
    loop {
        if let Some(until) = muted_until.take() {
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = shutdown.changed() => return,
            }
        }
        let received = tokio::select! {
            received = receive_frame(&mut stream, idle, max_request) => received,
            _ = shutdown.changed() => return,
        };
        let frame = match received {
            Ok(frame) => frame,
            Err(ReceiveError::Closed) => return,
            Err(error @ ReceiveError::TooLarge { .. }) => {
                tracing::warn!("closing connection from {peer}: {error}");
                return;
            }
            Err(error) => {
                tracing::debug!("closing connection from {peer}: {error}");
                return;
            }
        };
        let received = Instant::now();
        let header = RequestHeaderView::peek(&frame);
        if header.as_ref().map(|h| h.api_key) == Some(ApiKey::ApiVersions) {
            if let Some(software) = client_software(&frame) {
                session.client_software = software;
            }
        }
        if let (Some(sasl), Some(deadline)) = (sasl, session_deadline) {
            // KIP-368: a SaslHandshake re-authenticates on the open connection; past the
            // session's lifetime nothing else is served.
            if header.as_ref().map(|h| h.api_key) == Some(ApiKey::SaslHandshake) {
                let again = Reauthentication {
                    handshake: frame,
                    principal: session.principal.clone(),
                };
                let reauthenticated = tokio::select! {
                    done = authenticate(&mut stream, &mut session, &context, sasl, Some(again)) => done,
                    _ = shutdown.changed() => return,
                };
                if let Err(error) = reauthenticated {
                    tracing::info!("closing connection from {peer}: re-authentication: {error}");
                    return;
                }
                session_deadline = sasl.session_deadline();
                continue;
            }
            if received >= deadline {
                tracing::info!(
                    "closing connection from {peer}: its SASL session expired without \
                     re-authentication (connections.max.reauth.ms)"
                );
                return;
            }
        }
        let Ok(permit) = context.request_slots.acquire().await else {
            return;
        };
        let times = RequestTimes::new(received, Instant::now());
        let slot = RequestSlot::new(permit).timed(&times);
        // A fetch parked in the purgatory is dropped at shutdown, as Kafka drops the requests
        // of the connections it closes: it changes nothing, and waiting for its max_wait_ms
        // would only delay the stop. Other requests finish, so that what they write is whole.
        let abandon_at_shutdown = header.as_ref().map(|h| h.api_key) == Some(ApiKey::Fetch);
        let outcome = tokio::select! {
            outcome = handle_request(&context, &session, frame, slot) => outcome,
            _ = shutdown.changed(), if abandon_at_shutdown => return,
        };
        let completed = Instant::now();
        let (response, throttle) = match outcome {
            Outcome::Respond(response) => (Some(response), None),
            Outcome::NoResponse => (None, None),
            Outcome::Throttled { response, throttle } => (response, Some(throttle)),
            Outcome::Close(reason) => {
                tracing::warn!("closing connection from {peer}: {reason}");
                return;
            }
        };
        if let Some(throttle) = throttle {
            if throttle.before_send {
                tokio::select! {
                    _ = tokio::time::sleep(throttle.time) => {}
                    _ = shutdown.changed() => return,
                }
            } else {
                muted_until = Some(Instant::now() + throttle.time);
            }
        }
        let response_bytes = match response {
            Some(response) => {
                if let Err(error) = stream.write_frame(&response).await {
                    tracing::debug!("closing connection from {peer}: {error}");
                    return;
                }
                response.len()
            }
            None => 0,
        };
        if let Some(header) = header {
            let durations = times.durations(completed, Instant::now());
            context.metrics.requests.record(header.api_key, &durations);
            log_completed(&header, &session, &durations, response_bytes);
        }
    }
}
