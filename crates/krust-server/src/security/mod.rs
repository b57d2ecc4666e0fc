//! Authentication: what a listener's security protocol asks of a connection (TLS, SASL) and
//! the principal a connection authenticates as (docs/security.md). What that principal may do
//! is `authorizer`'s; running the handshake on a socket is `network::authenticate`'s.

pub mod authentication;
pub mod plain;
pub mod principal_mapping;
pub mod sasl;
pub mod scram;
pub mod session;
pub mod tls;

use std::sync::Arc;

use crate::security::session::SecurityProtocol;

/// A listener's security, built once at start-up from its (listener-prefixed) ssl.* and
/// sasl.* settings: TLS for SSL and SASL_SSL, SASL for SASL_PLAINTEXT and SASL_SSL.
#[derive(Debug, Clone, Default)]
pub struct ListenerSecurity {
    pub tls: Option<Arc<tls::TlsListener>>,
    pub sasl: Option<Arc<sasl::SaslSettings>>,
}

/// A listener's security settings that cannot serve its protocol; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum SecurityConfigError {
    #[error("{key}: {problem}")]
    Invalid { key: &'static str, problem: String },
    #[error("listener {listener} uses {protocol} but {missing}")]
    Missing {
        listener: String,
        protocol: &'static str,
        missing: &'static str,
    },
}

impl ListenerSecurity {
    /// Checks that the protocol has what it needs: TLS material for SSL/SASL_SSL and enabled
    /// mechanisms for SASL_*.
    pub fn check(
        &self,
        listener: &str,
        protocol: SecurityProtocol,
    ) -> Result<(), SecurityConfigError> {
        let missing = |missing| SecurityConfigError::Missing {
            listener: listener.to_string(),
            protocol: protocol.name(),
            missing,
        };
        let (needs_tls, needs_sasl) = match protocol {
            SecurityProtocol::Plaintext => (false, false),
            SecurityProtocol::Ssl => (true, false),
            SecurityProtocol::SaslPlaintext => (false, true),
            SecurityProtocol::SaslSsl => (true, true),
        };
        if needs_tls && self.tls.is_none() {
            return Err(missing(
                "no ssl.keystore.location or ssl.keystore.certificate.chain is set",
            ));
        }
        if needs_sasl && self.sasl.is_none() {
            return Err(missing("sasl.enabled.mechanisms names no mechanism"));
        }
        Ok(())
    }
}
