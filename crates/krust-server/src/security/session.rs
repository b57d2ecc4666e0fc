//! Who is at the other end of a connection: Kafka's `Session` and `RequestContext` fields that
//! do not change from one request to the next (see docs/session-and-routing.md).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

/// Kafka's `KafkaPrincipal`: a type and a name, written `User:alice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// The principal of a connection nothing authenticated (`User:ANONYMOUS`).
    pub fn anonymous() -> Self {
        KafkaPrincipal {
            principal_type: "User".into(),
            name: "ANONYMOUS".into(),
        }
    }

    /// `User:<name>`, the principal SASL and TLS authentication give.
    pub fn user(name: impl Into<String>) -> Self {
        KafkaPrincipal {
            principal_type: "User".into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// Kafka's `SecurityProtocol`, as named in listener.security.protocol.map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// A name that is not one of Kafka's security protocols.
#[derive(Debug, thiserror::Error)]
#[error("unknown security protocol {0:?}")]
pub struct UnknownSecurityProtocol(pub String);

impl FromStr for SecurityProtocol {
    type Err = UnknownSecurityProtocol;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            other => Err(UnknownSecurityProtocol(other.to_string())),
        }
    }
}

/// The listener name of the core's own requests to its controller. Configured listener names
/// are upper case, so this one never collides with a client listener.
pub const INTERNAL_LISTENER_NAME: &str = "krust-internal";

/// Kafka's `ClientInformation`: the software name and version a client sends in ApiVersions
/// v3+ (KIP-511), "unknown" until it does. KIP-714 subscriptions match on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSoftware {
    pub name: String,
    pub version: String,
}

impl Default for ClientSoftware {
    fn default() -> Self {
        ClientSoftware {
            name: "unknown".into(),
            version: "unknown".into(),
        }
    }
}

/// One connection's identity, fixed when the connection is accepted (or, for the core's own
/// requests, made by the core).
#[derive(Debug, Clone)]
pub struct Session {
    /// Who the client authenticated as; `User:ANONYMOUS` until SASL/TLS exist.
    pub principal: KafkaPrincipal,
    /// The listener the connection came in on (e.g. PLAINTEXT).
    pub listener_name: String,
    /// The listener's security protocol (listener.security.protocol.map).
    pub security_protocol: SecurityProtocol,
    /// The client's address and port.
    pub client_address: SocketAddr,
    /// The client software the connection's ApiVersions request named (KIP-511).
    pub client_software: ClientSoftware,
    /// True only for requests the core makes itself; nothing a client sends can set it.
    internal: bool,
}

impl Session {
    /// The session of a client connection accepted on a listener.
    pub fn client(
        listener_name: &str,
        security_protocol: SecurityProtocol,
        client_address: SocketAddr,
    ) -> Self {
        Session {
            principal: KafkaPrincipal::anonymous(),
            listener_name: listener_name.to_string(),
            security_protocol,
            client_address,
            client_software: ClientSoftware::default(),
            internal: false,
        }
    }

    /// The session of the core's own requests (e.g. topic auto-creation), which reach the
    /// controller in-process, the way a Kafka broker's requests reach its controller.
    pub(crate) fn internal() -> Self {
        Session {
            principal: KafkaPrincipal::anonymous(),
            listener_name: INTERNAL_LISTENER_NAME.to_string(),
            security_protocol: SecurityProtocol::Plaintext,
            client_address: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            client_software: ClientSoftware::default(),
            internal: true,
        }
    }

    /// The core's own request about this connection (its listener and client address), e.g.
    /// checking the connection's SASL/PLAIN credentials with a Python callback.
    pub(crate) fn internal_for_connection(&self) -> Self {
        Session {
            internal: true,
            ..self.clone()
        }
    }

    /// Whether the core itself made this request.
    pub fn is_internal(&self) -> bool {
        self.internal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_protocols_round_trip_through_kafka_names() {
        for protocol in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            assert_eq!(
                protocol.name().parse::<SecurityProtocol>().unwrap(),
                protocol
            );
        }
        assert!("plaintext".parse::<SecurityProtocol>().is_err());
    }

    #[test]
    fn only_the_core_makes_internal_sessions() {
        let address = "10.0.0.1:5000".parse().unwrap();
        let client = Session::client("PLAINTEXT", SecurityProtocol::Plaintext, address);
        assert!(!client.is_internal());
        assert_eq!(client.principal.to_string(), "User:ANONYMOUS");
        assert!(Session::internal().is_internal());
    }
}
