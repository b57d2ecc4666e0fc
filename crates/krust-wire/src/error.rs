//! Typed errors of a connection, each naming the node and, where there is one, the API.

use std::fmt;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use thiserror::Error;

/// An API by its key, shown by Kafka's name (krust-private keys by number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiName(pub i16);

impl fmt::Display for ApiName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match ApiKey::try_from(self.0) {
            Ok(key) => write!(f, "{key:?}"),
            Err(()) => write!(f, "api key {}", self.0),
        }
    }
}

/// Why talking to a node failed.
#[derive(Debug, Error)]
pub enum WireError {
    #[error("cannot connect to {address}: {source}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    #[error("TLS with {address} failed: {reason}")]
    Tls { address: String, reason: String },
    #[error("SASL authentication with {mechanism} to {address} failed: {reason}")]
    Authentication {
        mechanism: &'static str,
        address: String,
        reason: AuthenticationError,
    },
    #[error("connection to {address} failed: {source}")]
    Io {
        address: String,
        source: std::io::Error,
    },
    #[error("connection to {address} was closed")]
    Disconnected { address: String },
    #[error("{api} request to {address} timed out after {} ms", after.as_millis())]
    Timeout {
        api: ApiName,
        address: String,
        after: Duration,
    },
    #[error("{api} request to {address} could not be encoded or its response decoded: {reason}")]
    Codec {
        api: ApiName,
        address: String,
        reason: String,
    },
    #[error("{api} response from {address} answers correlation id {got}, expected {expected}")]
    CorrelationMismatch {
        api: ApiName,
        address: String,
        expected: i32,
        got: i32,
    },
    #[error("response of {size} bytes from {address} is larger than {limit} bytes")]
    ResponseTooLarge {
        address: String,
        size: usize,
        limit: usize,
    },
    #[error("{address} and this client share no version of {api} (it takes {min}..={max})")]
    NoCommonVersion {
        api: ApiName,
        address: String,
        min: i16,
        max: i16,
    },
    #[error("ApiVersions to {address} failed: {error:?} (Kafka error code {})", error.code())]
    ApiVersions {
        address: String,
        error: kafka_protocol::error::ResponseError,
    },
}

impl WireError {
    /// Whether the connection is gone and a new one may succeed (a node restarting, a network
    /// that dropped, a request that timed out).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::Io { .. }
                | Self::Disconnected { .. }
                | Self::Timeout { .. }
        )
    }
}

/// Why a SASL exchange failed on the client's side.
#[derive(Debug, Error)]
pub enum AuthenticationError {
    #[error("SaslHandshake failed with {error:?}: {}", enabled_text(.enabled))]
    Handshake {
        error: kafka_protocol::error::ResponseError,
        /// The mechanisms the listener enables.
        enabled: Vec<String>,
    },
    #[error("{} ({error:?}){}", message.as_deref().unwrap_or("no message"), credentials_hint(*.error))]
    Refused {
        error: kafka_protocol::error::ResponseError,
        message: Option<String>,
    },
    #[error(transparent)]
    Scram(#[from] crate::sasl::ScramClientError),
}

fn enabled_text(enabled: &[String]) -> String {
    if enabled.is_empty() {
        "this listener takes no SASL (check security.protocol)".to_string()
    } else {
        format!("the listener enables {}", enabled.join(", "))
    }
}

fn credentials_hint(error: kafka_protocol::error::ResponseError) -> &'static str {
    if error == kafka_protocol::error::ResponseError::SaslAuthenticationFailed {
        "; the user and password come from sasl.jaas.config"
    } else {
        ""
    }
}
