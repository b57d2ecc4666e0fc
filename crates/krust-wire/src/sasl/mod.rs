//! SASL mechanisms, one copy of each for both sides of an exchange: the broker's
//! authenticator (crates/krust-server/src/security) and this crate's client
//! ([`crate::authenticate`]).
//!
//! - [`plain`]: SASL/PLAIN (RFC 4616), KIP-43.
//! - [`scram`]: SCRAM's key derivation and credentials (RFC 5802, RFC 7677), KIP-84.
//! - [`scram_client`] / [`scram_server`]: the two halves of a SCRAM exchange.
//!
//! The messages travel in SaslAuthenticate requests (KIP-152); that transport is not here.

pub mod plain;
pub mod scram;
pub mod scram_client;
pub mod scram_server;

pub use scram::{ScramCredential, ScramKeys, ScramMechanism};
pub use scram_client::{ScramClient, ScramClientError};
pub use scram_server::{ScramAuthenticationFailed, ScramServer, ScramStep};

/// A SASL mechanism krust speaks, by the name `sasl.enabled.mechanisms` and `sasl.mechanism`
/// use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// The mechanism Kafka calls `name`, if krust speaks it.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Some(SaslMechanism::Scram(ScramMechanism::Sha256)),
            "SCRAM-SHA-512" => Some(SaslMechanism::Scram(ScramMechanism::Sha512)),
            _ => None,
        }
    }

    /// Kafka's name of the mechanism.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(scram) => scram.name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_record_types_are_kafkas() {
        for name in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            assert_eq!(
                SaslMechanism::from_name(name).map(SaslMechanism::name),
                Some(name)
            );
        }
        assert_eq!(SaslMechanism::from_name("GSSAPI"), None);
        assert_eq!(ScramMechanism::from_type(1), Some(ScramMechanism::Sha256));
        assert_eq!(ScramMechanism::from_type(2), Some(ScramMechanism::Sha512));
        assert_eq!(ScramMechanism::from_type(0), None);
    }
}
