//! What every SASL mechanism of the broker shares: the failure a client is told (the mechanisms
//! themselves are krust-wire's, one copy for both sides).

/// Why a SASL exchange failed; the message is what the client is told (Kafka's
/// SaslAuthenticationException message).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthenticationFailed(pub String);
