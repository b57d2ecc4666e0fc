//! What every SASL mechanism shares: the failure a client is told, and a comparison of secrets
//! that does not leak where they differ.

/// Why a SASL exchange failed; the message is what the client is told (Kafka's
/// SaslAuthenticationException message).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthenticationFailed(pub String);

/// Compares without stopping at the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
