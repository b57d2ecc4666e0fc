//! SaslHandshake and SaslAuthenticate outside a SASL exchange: on a PLAINTEXT or SSL listener,
//! or after the connection authenticated. Kafka answers ILLEGAL_SASL_STATE (KafkaApis); the
//! exchange itself is `network::authenticate`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

pub fn handshake(_request: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

pub fn authenticate(_request: SaslAuthenticateRequest) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
