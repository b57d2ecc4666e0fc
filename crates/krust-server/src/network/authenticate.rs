//! The SASL exchange of a connection on a SASL_PLAINTEXT or SASL_SSL listener, before any
//! other request is read (Kafka's SaslServerAuthenticator).
//!
//! Only ApiVersions and SaslHandshake are read first, then SaslAuthenticate until the
//! mechanism completes; anything else closes the connection. A SaslHandshake v0 client sends
//! the mechanism's messages as bare size-prefixed frames instead of SaslAuthenticate requests
//! (KIP-152). A failed exchange is answered with SASL_AUTHENTICATION_FAILED and its message,
//! an unknown mechanism with UNSUPPORTED_SASL_MECHANISM and the enabled ones, and the
//! connection is closed.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWriteExt;

use super::receive::receive_frame;
use super::transport::Transport;
use crate::network::client_software::client_software;
use crate::network::dispatch::handle_request;
use crate::request::request_context::{parse_header, Outcome, RequestSlot};
use crate::request::response_frame::encode_frame;
use crate::security::authentication::AuthenticationFailed;
use crate::security::plain;
use crate::security::sasl::{SaslExchange, SaslSettings, SaslStep};
use crate::security::session::{KafkaPrincipal, Session};
use crate::server_context::ServerContext;

/// The SaslAuthenticate version of the core's requests to the Python PLAIN callback.
const PLAIN_CALLBACK_VERSION: i16 = 2;

/// Kafka's sasl.server.max.receive.size default: the largest frame read before authentication.
const MAX_UNAUTHENTICATED_FRAME: usize = 524_288;

/// Why a connection did not authenticate; logged once, then the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum AuthenticationError {
    #[error("authentication failed ({mechanism}): {message}")]
    Failed {
        mechanism: &'static str,
        message: String,
    },
    #[error("unsupported SASL mechanism {0:?}")]
    UnsupportedMechanism(String),
    #[error("{0:?} request before SASL authentication completed")]
    Unexpected(ApiKey),
    #[error("the client left during SASL authentication: {0}")]
    Receive(#[from] super::receive::ReceiveError),
    #[error("writing a SASL response failed: {0}")]
    Write(#[from] std::io::Error),
    #[error("malformed request during SASL authentication: {0}")]
    Malformed(String),
}

enum State {
    /// Waiting for ApiVersions or SaslHandshake.
    Handshake,
    /// Mechanism chosen; messages come in SaslAuthenticate requests (handshake v1).
    Authenticate(&'static str, SaslExchange),
    /// Mechanism chosen with handshake v0: messages come as bare frames.
    Raw(&'static str, SaslExchange),
}

/// A re-authentication (KIP-368): the SaslHandshake frame an authenticated client sent, and
/// the principal it authenticated as, which must not change.
pub struct Reauthentication {
    pub handshake: Bytes,
    pub principal: KafkaPrincipal,
}

/// Runs the SASL exchange; the principal the client authenticated as, or why it did not.
pub async fn authenticate<S: Transport>(
    stream: &mut S,
    session: &mut Session,
    context: &ServerContext,
    sasl: &SaslSettings,
    reauthentication: Option<Reauthentication>,
) -> Result<KafkaPrincipal, AuthenticationError> {
    let idle = std::time::Duration::from_millis(context.settings.connections_max_idle_ms);
    let mut state = State::Handshake;
    let (mut pending, previous) = match reauthentication {
        Some(again) => (Some(again.handshake), Some(again.principal)),
        None => (None, None),
    };
    loop {
        let frame = match pending.take() {
            Some(frame) => frame,
            None => receive_frame(stream, idle, MAX_UNAUTHENTICATED_FRAME).await?,
        };
        if let State::Raw(mechanism, exchange) = &mut state {
            let step = evaluate(exchange, mechanism, &frame, sasl, context, session).await;
            let (reply, done) = match step? {
                SaslStep::Challenge(reply) => (reply, None),
                SaslStep::Done { user, reply } => (
                    reply,
                    Some(same_principal(user, previous.as_ref(), mechanism)?),
                ),
            };
            let mut framed = (reply.len() as i32).to_be_bytes().to_vec();
            framed.extend_from_slice(&reply);
            stream.write_all(&framed).await?;
            stream.flush().await?;
            match done {
                Some(principal) => return Ok(principal),
                None => continue,
            }
        }
        let (api_key, header, body) =
            parse_header(frame.clone()).map_err(AuthenticationError::Malformed)?;
        let version = header.request_api_version;
        match (&mut state, api_key) {
            (State::Handshake, ApiKey::ApiVersions) => {
                let Ok(permit) = context.request_slots.acquire().await else {
                    return Err(AuthenticationError::Unexpected(api_key));
                };
                if let Some(software) = client_software(&frame) {
                    session.client_software = software;
                }
                match handle_request(context, session, frame, RequestSlot::new(permit)).await {
                    Outcome::Respond(response) => stream.write_frame(&response).await?,
                    // Before authentication there is no principal to throttle.
                    Outcome::Throttled {
                        response: Some(response),
                        ..
                    } => stream.write_frame(&response).await?,
                    Outcome::NoResponse | Outcome::Throttled { response: None, .. } => {}
                    Outcome::Close(reason) => return Err(AuthenticationError::Malformed(reason)),
                }
            }
            (State::Handshake, ApiKey::SaslHandshake) if version <= 1 => {
                let request: SaslHandshakeRequest = decode(body, version)?;
                let enabled = sasl.enabled(&request.mechanism);
                let mut response = SaslHandshakeResponse::default().with_mechanisms(
                    sasl.mechanism_names()
                        .into_iter()
                        .map(StrBytes::from_static_str)
                        .collect(),
                );
                if enabled.is_none() {
                    response.error_code = ResponseError::UnsupportedSaslMechanism.code();
                }
                write(stream, &header, api_key, &response).await?;
                let Some(mechanism) = enabled else {
                    return Err(AuthenticationError::UnsupportedMechanism(
                        request.mechanism.to_string(),
                    ));
                };
                let exchange = SaslExchange::new(mechanism);
                state = if version == 0 {
                    State::Raw(mechanism.name(), exchange)
                } else {
                    State::Authenticate(mechanism.name(), exchange)
                };
            }
            (State::Authenticate(mechanism, exchange), ApiKey::SaslAuthenticate)
                if version <= 2 =>
            {
                let request: SaslAuthenticateRequest = decode(body, version)?;
                let step = evaluate(
                    exchange,
                    mechanism,
                    &request.auth_bytes,
                    sasl,
                    context,
                    session,
                )
                .await;
                let mut response = SaslAuthenticateResponse::default();
                let outcome = match step.and_then(|step| match step {
                    SaslStep::Challenge(reply) => Ok((reply, None)),
                    SaslStep::Done { user, reply } => {
                        let principal = same_principal(user, previous.as_ref(), mechanism)?;
                        Ok((reply, Some(principal)))
                    }
                }) {
                    Ok((reply, None)) => {
                        response.auth_bytes = Bytes::from(reply);
                        None
                    }
                    Ok((reply, Some(principal))) => {
                        response.auth_bytes = Bytes::from(reply);
                        // KIP-368: the client must authenticate again within this many ms.
                        response.session_lifetime_ms = sasl.reauth_ms;
                        Some(Ok(principal))
                    }
                    Err(error) => {
                        response.error_code = ResponseError::SaslAuthenticationFailed.code();
                        if let AuthenticationError::Failed { message, .. } = &error {
                            response.error_message = Some(StrBytes::from_string(message.clone()));
                        }
                        Some(Err(error))
                    }
                };
                write(stream, &header, api_key, &response).await?;
                if let Some(outcome) = outcome {
                    return outcome;
                }
            }
            _ => return Err(AuthenticationError::Unexpected(api_key)),
        }
    }
}

async fn evaluate(
    exchange: &mut SaslExchange,
    mechanism: &'static str,
    message: &[u8],
    sasl: &SaslSettings,
    context: &ServerContext,
    session: &Session,
) -> Result<SaslStep, AuthenticationError> {
    let step = match exchange {
        SaslExchange::Plain if sasl.plain_callback => {
            plain_callback(message, context, session).await
        }
        _ => exchange.evaluate(message, sasl, &context.scram_credentials),
    };
    step.map_err(|failed| AuthenticationError::Failed {
        mechanism,
        message: failed.0,
    })
}

/// SASL/PLAIN credentials checked by the listener's Python callback: the core sends Python an
/// internal SaslAuthenticate request with the client's PLAIN message (on the plugin's own
/// thread there, never on a tokio worker) and takes its error code as the verdict.
async fn plain_callback(
    message: &[u8],
    context: &ServerContext,
    session: &Session,
) -> Result<SaslStep, AuthenticationFailed> {
    let (user, _) = plain::parse(message)?;
    let request =
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(message));
    let response = context
        .bridge
        .call_internal_in(
            session.internal_for_connection(),
            &request,
            PLAIN_CALLBACK_VERSION,
        )
        .await
        .map_err(|error| {
            AuthenticationFailed(format!(
                "Authentication failed: the credential check failed: {error}"
            ))
        })?;
    if response.error_code != 0 {
        let message = response.error_message.map(|m| m.to_string());
        return Err(AuthenticationFailed(message.unwrap_or_else(|| {
            "Authentication failed: Invalid username or password".into()
        })));
    }
    Ok(SaslStep::Done {
        user,
        reply: Vec::new(),
    })
}

/// The principal of a completed exchange; a re-authentication must keep the principal it had
/// (Kafka refuses to change it on an open connection).
fn same_principal(
    user: String,
    previous: Option<&KafkaPrincipal>,
    mechanism: &'static str,
) -> Result<KafkaPrincipal, AuthenticationError> {
    let principal = KafkaPrincipal::user(user);
    match previous {
        Some(previous) if *previous != principal => Err(AuthenticationError::Failed {
            mechanism,
            message: format!(
                "Cannot change principals during re-authentication from {previous}: {principal}"
            ),
        }),
        _ => Ok(principal),
    }
}

fn decode<T: Decodable>(mut body: Bytes, version: i16) -> Result<T, AuthenticationError> {
    T::decode(&mut body, version).map_err(|error| AuthenticationError::Malformed(error.to_string()))
}

async fn write<S: Transport, T: Encodable>(
    stream: &mut S,
    header: &RequestHeader,
    api_key: ApiKey,
    response: &T,
) -> Result<(), AuthenticationError> {
    let version = header.request_api_version;
    let frame = encode_frame(
        header.correlation_id,
        api_key.response_header_version(version),
        response,
        version,
        None,
    )
    .map_err(AuthenticationError::Malformed)?;
    stream.write_frame(&frame).await?;
    Ok(())
}
