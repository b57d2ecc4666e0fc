//! The client side of a SASL exchange over a connection (SaslHandshake, then SaslAuthenticate
//! until the mechanism is done): PLAIN or SCRAM with the credentials of `security::sasl`.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::Connection;
use crate::error::ClientError;
use crate::security::sasl::{SaslCredentials, SaslMechanism};
use crate::security::scram::ScramClient;

/// SaslHandshake v1: the SASL messages follow in SaslAuthenticate requests (KIP-152).
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate v2 (flexible versions); v1 added the session lifetime (KIP-368).
const SASL_AUTHENTICATE_VERSION: i16 = 2;

/// Authenticates `connection` with `credentials`.
pub fn authenticate(
    connection: &mut Connection,
    credentials: &SaslCredentials,
) -> Result<(), ClientError> {
    let mechanism = credentials.mechanism.name();
    let failed = |connection: &Connection, message: String| ClientError::Authentication {
        mechanism,
        address: connection.address().to_string(),
        message,
    };
    let handshake = connection.send(
        "SaslHandshake",
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
        SASL_HANDSHAKE_VERSION,
    )?;
    if let Some(error) = ResponseError::try_from_code(handshake.error_code) {
        let enabled: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        let why = if enabled.is_empty() {
            "this listener takes no SASL (check security.protocol)".to_string()
        } else {
            format!("the listener enables {}", enabled.join(", "))
        };
        return Err(failed(
            connection,
            format!("SaslHandshake failed with {error:?}: {why}"),
        ));
    }
    match credentials.mechanism {
        SaslMechanism::Plain => {
            let message = format!("\0{}\0{}", credentials.username, credentials.password);
            exchange(connection, mechanism, message.into_bytes())?;
        }
        SaslMechanism::Scram(scram) => {
            let mut client = ScramClient::new(scram, &credentials.username, &credentials.password)
                .map_err(|e| failed(connection, e.to_string()))?;
            let server_first = exchange(connection, mechanism, client.first())?;
            let client_final = client
                .answer(&server_first)
                .map_err(|e| failed(connection, e.to_string()))?;
            let server_final = exchange(connection, mechanism, client_final)?;
            client
                .verify(&server_final)
                .map_err(|e| failed(connection, e.to_string()))?;
        }
    }
    Ok(())
}

/// Sends one SASL message; the server's answer.
fn exchange(
    connection: &mut Connection,
    mechanism: &'static str,
    message: Vec<u8>,
) -> Result<Bytes, ClientError> {
    let response = connection.send(
        "SaslAuthenticate",
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
        SASL_AUTHENTICATE_VERSION,
    )?;
    match ResponseError::try_from_code(response.error_code) {
        None => Ok(response.auth_bytes),
        Some(error) => Err(ClientError::Authentication {
            mechanism,
            address: connection.address().to_string(),
            message: format!(
                "{} ({error:?}){}",
                response.error_message.as_deref().unwrap_or("no message"),
                if error == ResponseError::SaslAuthenticationFailed {
                    "; the user and password come from sasl.jaas.config"
                } else {
                    ""
                }
            ),
        }),
    }
}
