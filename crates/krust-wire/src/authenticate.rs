//! The client side of SASL as Kafka's clients run it (KIP-43, KIP-152): SaslHandshake names
//! the mechanism, then SaslAuthenticate requests carry its messages ([`crate::sasl`]).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{AuthenticationError, WireError};
use crate::sasl::{plain, SaslMechanism, ScramClient};
use crate::security::SaslCredentials;

/// SaslHandshake v1: the SASL messages follow in SaslAuthenticate requests (KIP-152).
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate v2 (flexible versions); v1 added the session lifetime (KIP-368).
const SASL_AUTHENTICATE_VERSION: i16 = 2;

/// Authenticates `connection` with `credentials`.
pub async fn authenticate(
    connection: &Connection,
    credentials: &SaslCredentials,
) -> Result<(), WireError> {
    let mechanism = credentials.mechanism.name();
    let failed = |reason: AuthenticationError| WireError::Authentication {
        mechanism,
        address: connection.address().to_string(),
        reason,
    };
    let handshake = connection
        .send(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
            SASL_HANDSHAKE_VERSION,
        )
        .await?;
    if let Some(error) = ResponseError::try_from_code(handshake.error_code) {
        return Err(failed(AuthenticationError::Handshake {
            error,
            enabled: handshake.mechanisms.iter().map(|m| m.to_string()).collect(),
        }));
    }
    match credentials.mechanism {
        SaslMechanism::Plain => {
            let message = plain::client_message(&credentials.username, &credentials.password);
            exchange(connection, mechanism, message).await?;
        }
        SaslMechanism::Scram(scram) => {
            let mut client = ScramClient::new(scram, &credentials.username, &credentials.password)
                .map_err(|e| failed(e.into()))?;
            let server_first = exchange(connection, mechanism, client.first()).await?;
            let client_final = client.answer(&server_first).map_err(|e| failed(e.into()))?;
            let server_final = exchange(connection, mechanism, client_final).await?;
            client.verify(&server_final).map_err(|e| failed(e.into()))?;
        }
    }
    Ok(())
}

/// Sends one SASL message; the node's answer.
async fn exchange(
    connection: &Connection,
    mechanism: &'static str,
    message: Vec<u8>,
) -> Result<Bytes, WireError> {
    let response = connection
        .send(
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
            SASL_AUTHENTICATE_VERSION,
        )
        .await?;
    match ResponseError::try_from_code(response.error_code) {
        None => Ok(response.auth_bytes),
        Some(error) => Err(WireError::Authentication {
            mechanism,
            address: connection.address().to_string(),
            reason: AuthenticationError::Refused {
                error,
                message: response.error_message.map(|m| m.to_string()),
            },
        }),
    }
}
