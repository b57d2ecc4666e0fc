//! What every connection to a node is opened with: who the client is, how long a request may
//! take, how large a response may be, how many requests may wait at once, and how the
//! connection is secured.

use std::sync::Arc;
use std::time::Duration;

use crate::security::SecurityConfig;

/// The largest response accepted by default: a Fetch asks for at most `fetch.max.bytes` (50
/// MiB by default) plus one oversized batch per partition (KIP-74), so this leaves room for
/// both.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 256 << 20;

/// Kafka's `max.in.flight.requests.per.connection` default.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 5;

/// How connections are opened and used.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// The request header's client id.
    pub client_id: String,
    /// `request.timeout.ms`: connecting (TCP, TLS, ApiVersions, SASL) and each request give
    /// up after this; a request that timed out closes its connection, as Kafka's clients do.
    pub request_timeout: Duration,
    /// A response frame larger than this closes the connection unread.
    pub max_response_bytes: usize,
    /// Requests sent and not yet answered on one connection; more wait for a slot.
    pub max_in_flight: usize,
    /// Whether connecting asks the node's ApiVersions (KIP-511) so that
    /// [`crate::Connection::version`] can pick versions both sides take.
    pub negotiate_versions: bool,
    /// TLS and SASL, per `security.protocol`.
    pub security: Arc<SecurityConfig>,
}

impl ConnectionConfig {
    /// Plaintext connections for `client_id` with Kafka's client defaults.
    pub fn new(client_id: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            negotiate_versions: false,
            security: Arc::default(),
        }
    }

    /// The same with `timeout` for connecting and for each request.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The same secured as `security` says.
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.security = security;
        self
    }
}
