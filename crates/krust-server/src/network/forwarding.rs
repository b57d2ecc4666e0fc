//! Forwarding (KIP-590): a broker in a controller quorum of several voters sends the admin
//! requests the active controller decides (CreateTopics, IncrementalAlterConfigs, CreateAcls,
//! ...) inside an Envelope, with the client's principal and address; the controller unwraps
//! it, serves the inner request as that client and answers the inner response in the
//! EnvelopeResponse, which the broker hands back to the client untouched.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::DefaultPrincipalData;
use kafka_protocol::messages::{ApiKey, EnvelopeRequest, EnvelopeResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::authorizer::{AclOperation, Action};
use crate::bridge::{BridgeCall, BridgeReply};
use crate::request::request_context::{parse_header, respond, Outcome, RequestContext};
use crate::request::response_frame::frame_header_and_body;
use crate::request::routing::Handler;
use crate::security::session::{KafkaPrincipal, Session};
use crate::server_context::ServerContext;

const ENVELOPE_VERSION: i16 = 0;
const DEFAULT_PRINCIPAL_DATA_VERSION: i16 = 0;
const NONE: i16 = 0;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const NOT_CONTROLLER: i16 = 41;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;
/// How often a forwarded request is tried again while the controller is changing (Kafka's
/// ForwardingManager retries NOT_CONTROLLER until the request times out).
const NOT_CONTROLLER_ATTEMPTS: u32 = 50;
const NOT_CONTROLLER_BACKOFF: Duration = Duration::from_millis(100);

/// Sends a client's request (its frame: header and body) to the active controller in an
/// Envelope and answers the client with the controller's response.
pub async fn forward(
    context: &ServerContext,
    request: &RequestContext<'_>,
    frame: Bytes,
) -> Outcome {
    let Some(channels) = context.controller_channels.as_ref() else {
        return Outcome::Close("forwarding needs a controller quorum".into());
    };
    let envelope = EnvelopeRequest::default()
        .with_request_data(frame)
        .with_request_principal(Some(principal_bytes(&request.session.principal)))
        .with_client_host_address(address_bytes(request.session.client_address.ip()));
    let mut body = BytesMut::new();
    if let Err(error) = envelope.encode(&mut body, ENVELOPE_VERSION) {
        return Outcome::Close(format!("cannot encode an Envelope: {error}"));
    }
    let body = body.freeze();
    request.park();
    for _ in 0..NOT_CONTROLLER_ATTEMPTS {
        let answer = channels
            .forwarding
            .send(ApiKey::Envelope, ENVELOPE_VERSION, body.clone())
            .await;
        let mut bytes = match answer {
            Ok(bytes) => bytes,
            Err(error) => return Outcome::Close(format!("forwarding to the controller: {error}")),
        };
        let response = match EnvelopeResponse::decode(&mut bytes, ENVELOPE_VERSION) {
            Ok(response) => response,
            Err(error) => return Outcome::Close(format!("malformed EnvelopeResponse: {error}")),
        };
        match response.error_code {
            NONE => {
                let data = response.response_data.unwrap_or_default();
                return Outcome::Respond(frame_header_and_body(&data));
            }
            NOT_CONTROLLER => tokio::time::sleep(NOT_CONTROLLER_BACKOFF).await,
            code => {
                return Outcome::Close(format!(
                    "the controller refused the forwarded {:?} with error {code}",
                    request.api_key
                ))
            }
        }
    }
    Outcome::Close(format!(
        "no active controller took the forwarded {:?}",
        request.api_key
    ))
}

/// Serves an Envelope on the controller listener: the inner request as the client it names.
pub async fn handle_envelope(
    context: &ServerContext,
    request: &RequestContext<'_>,
    body: Bytes,
) -> Outcome {
    let mut body = body;
    let envelope = match EnvelopeRequest::decode(&mut body, request.version()) {
        Ok(envelope) => envelope,
        Err(error) => return Outcome::Close(format!("malformed Envelope: {error}")),
    };
    let answer = |error_code: i16, response_data: Option<Bytes>| {
        let response = EnvelopeResponse::default()
            .with_error_code(error_code)
            .with_response_data(response_data);
        respond(request, &response)
    };
    // As Kafka's ControllerApis: only brokers (CLUSTER_ACTION) may forward.
    if let Some(authorizer) = &context.authorizer {
        if !authorizer
            .allows(request, Action::on_cluster(AclOperation::ClusterAction))
            .await
        {
            return answer(CLUSTER_AUTHORIZATION_FAILED, None);
        }
    }
    if !context.is_active_controller() {
        return answer(NOT_CONTROLLER, None);
    }
    let Some(session) = forwarded_session(request.session, &envelope) else {
        return answer(INVALID_REQUEST, None);
    };
    let (api_key, header, inner_body) = match parse_header(envelope.request_data) {
        Ok(parsed) => parsed,
        Err(_) => return answer(INVALID_REQUEST, None),
    };
    let version = header.request_api_version;
    let route = context.routes.route(&session, api_key);
    let Some(route) = route.filter(|r| r.handler == Handler::Python) else {
        return answer(INVALID_REQUEST, None);
    };
    if version < route.min_version || version > route.max_version {
        return answer(UNSUPPORTED_VERSION, None);
    }
    request.park();
    let call = BridgeCall::from_client(&header, &session, inner_body);
    match context.bridge.call(call).await {
        Ok(BridgeReply::Response { body, .. }) => {
            answer(NONE, Some(inner_response(&header, api_key, &body)))
        }
        // The inner request was refused as a client's would be: its connection is the
        // broker's, so the broker closes the client's.
        Ok(BridgeReply::CloseConnection) => answer(INVALID_REQUEST, None),
        Err(error) => Outcome::Close(error.to_string()),
    }
}

/// The session the inner request is served in: the forwarding connection's listener, with
/// the client's principal and address.
fn forwarded_session(envelope_session: &Session, envelope: &EnvelopeRequest) -> Option<Session> {
    let mut data = envelope.request_principal.clone()?;
    if data.len() < 2 || i16::from_be_bytes([data[0], data[1]]) != DEFAULT_PRINCIPAL_DATA_VERSION {
        return None;
    }
    bytes::Buf::advance(&mut data, 2);
    let principal = DefaultPrincipalData::decode(&mut data, DEFAULT_PRINCIPAL_DATA_VERSION).ok()?;
    let address = match envelope.client_host_address.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(&envelope.client_host_address[..]).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(&envelope.client_host_address[..]).ok()?),
        _ => return None,
    };
    let mut session = Session::client(
        &envelope_session.listener_name,
        envelope_session.security_protocol,
        SocketAddr::new(address, 0),
    );
    session.principal = KafkaPrincipal {
        principal_type: principal._type.to_string(),
        name: principal.name.to_string(),
    };
    Some(session)
}

/// Kafka's DefaultKafkaPrincipalBuilder serialisation: the version, then DefaultPrincipalData.
fn principal_bytes(principal: &KafkaPrincipal) -> Bytes {
    let data = DefaultPrincipalData::default()
        .with_type(StrBytes::from_string(principal.principal_type.clone()))
        .with_name(StrBytes::from_string(principal.name.clone()));
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&DEFAULT_PRINCIPAL_DATA_VERSION.to_be_bytes());
    data.encode(&mut bytes, DEFAULT_PRINCIPAL_DATA_VERSION)
        .expect("a principal's strings always encode");
    bytes.freeze()
}

fn address_bytes(address: IpAddr) -> Bytes {
    match address {
        IpAddr::V4(v4) => Bytes::copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => Bytes::copy_from_slice(&v6.octets()),
    }
}

/// The inner response as the client expects it: its header, then the body Python encoded.
fn inner_response(header: &RequestHeader, api_key: ApiKey, body: &[u8]) -> Bytes {
    let header_version = api_key.response_header_version(header.request_api_version);
    let mut bytes = BytesMut::with_capacity(5 + body.len());
    bytes.extend_from_slice(&header.correlation_id.to_be_bytes());
    if header_version >= 1 {
        bytes.extend_from_slice(&[0]); // no tagged fields
    }
    bytes.extend_from_slice(body);
    bytes.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::session::SecurityProtocol;

    #[test]
    fn the_forwarded_session_carries_the_clients_principal_and_address() {
        let mut client = Session::client(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            "10.1.2.3:5555".parse().unwrap(),
        );
        client.principal = KafkaPrincipal::user("alice");
        let envelope = EnvelopeRequest::default()
            .with_request_principal(Some(principal_bytes(&client.principal)))
            .with_client_host_address(address_bytes(client.client_address.ip()));
        let controller = Session::client(
            "CONTROLLER",
            SecurityProtocol::Plaintext,
            "127.0.0.1:9000".parse().unwrap(),
        );
        let session = forwarded_session(&controller, &envelope).unwrap();
        assert_eq!(session.principal, KafkaPrincipal::user("alice"));
        assert_eq!(session.client_address.ip(), client.client_address.ip());
        assert_eq!(session.listener_name, "CONTROLLER");
        assert!(!session.is_internal());
    }

    #[test]
    fn a_forged_principal_or_address_is_refused() {
        let controller = Session::client(
            "CONTROLLER",
            SecurityProtocol::Plaintext,
            "127.0.0.1:9000".parse().unwrap(),
        );
        let good = principal_bytes(&KafkaPrincipal::user("bob"));
        for (principal, address) in [
            (None, Bytes::from_static(&[127, 0, 0, 1])),
            (
                Some(Bytes::from_static(&[0, 9, 1])),
                Bytes::from_static(&[127, 0, 0, 1]),
            ),
            (
                Some(good.slice(..good.len() - 3)),
                Bytes::from_static(&[127, 0, 0, 1]),
            ),
            (Some(good), Bytes::from_static(&[1, 2, 3])),
        ] {
            let envelope = EnvelopeRequest::default()
                .with_request_principal(principal)
                .with_client_host_address(address);
            assert!(forwarded_session(&controller, &envelope).is_none());
        }
    }
}
