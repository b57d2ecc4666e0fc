//! The client's security settings, read from Kafka's own client keys (`security.protocol`,
//! `ssl.*`, `sasl.*`) as a Java client configured with the same keys would read them:
//!
//! - [`tls`]: TLS with rustls, PEM trust and key stores, hostname verification.
//! - [`jaas`]: the SASL mechanism and the credentials of `sasl.jaas.config`.
//!
//! The broker's own listeners read their settings elsewhere (crates/krust-server); what a
//! connection does with these is in [`crate::connection`] and [`crate::authenticate`].

use std::collections::BTreeMap;
use std::sync::Arc;

use thiserror::Error;

pub mod jaas;
pub mod tls;

pub use jaas::SaslCredentials;

/// A setting that is missing, malformed or not supported; `key` is Kafka's name for it.
#[derive(Debug, Error)]
#[error("{key}: {problem}")]
pub struct SecurityConfigError {
    pub key: String,
    pub problem: String,
}

impl SecurityConfigError {
    /// The problem `problem` with the setting `key`.
    pub fn new(key: &str, problem: impl Into<String>) -> Self {
        Self {
            key: key.to_string(),
            problem: problem.into(),
        }
    }
}

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(name: &str) -> Result<Self, SecurityConfigError> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(SecurityConfigError::new(
                "security.protocol",
                format!("must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, not {name:?}"),
            )),
        }
    }

    /// Whether connections run TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// Keys a Java client accepts that this client refuses, and why.
const REFUSED: &[(&str, &str)] = &[
    (
        "ssl.key.password",
        "encrypted private keys are not supported: give an unencrypted PEM key",
    ),
    (
        "ssl.keystore.password",
        "only PEM key stores without a password are supported",
    ),
    (
        "ssl.truststore.password",
        "only PEM trust stores without a password are supported",
    ),
];

/// Every key [`SecurityConfig::from_properties`] reads.
pub const SUPPORTED_KEYS: &[&str] = &[
    "security.protocol",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
];

/// How every connection of a client is secured.
#[derive(Debug, Clone, Default)]
pub struct SecurityConfig {
    pub protocol: SecurityProtocol,
    /// Set for SSL and SASL_SSL.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Set for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslCredentials>,
}

impl SecurityConfig {
    /// The settings of `properties` (Kafka client keys, lower case). A key this client does
    /// not read is refused by name rather than ignored: it may ask for security it does not
    /// give. Settings of a layer the protocol does not use are ignored, as Kafka does.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, SecurityConfigError> {
        for key in properties.keys() {
            if let Some((_, why)) = REFUSED.iter().find(|(refused, _)| refused == key) {
                return Err(SecurityConfigError::new(key, *why));
            }
            if !SUPPORTED_KEYS.contains(&key.as_str()) {
                return Err(SecurityConfigError::new(
                    key,
                    format!(
                        "not supported by this client (it reads {})",
                        SUPPORTED_KEYS.join(", ")
                    ),
                ));
            }
        }
        let get = |key: &str| properties.get(key).map(String::as_str);
        let protocol = get("security.protocol")
            .map(SecurityProtocol::parse)
            .transpose()?
            .unwrap_or_default();
        let tls = if protocol.uses_tls() {
            Some(Arc::new(tls::client_config(&get)?))
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(SaslCredentials::from_properties(&get)?)
        } else {
            None
        };
        Ok(Self {
            protocol,
            tls,
            sasl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<SecurityConfig, SecurityConfigError> {
        SecurityConfig::from_properties(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn unknown_and_unsupported_keys_are_refused_by_name() {
        let error = parse(&[("ssl.key.password", "x")]).unwrap_err();
        assert_eq!(error.key, "ssl.key.password");
        assert!(error.problem.contains("encrypted private keys"));
        let error = parse(&[("sasl.kerberos.service.name", "kafka")]).unwrap_err();
        assert_eq!(error.key, "sasl.kerberos.service.name");
        let error = parse(&[("security.protocol", "TLS")]).unwrap_err();
        assert_eq!(error.key, "security.protocol");
    }

    #[test]
    fn plaintext_ignores_the_settings_of_layers_it_does_not_use() {
        let config = parse(&[("sasl.mechanism", "PLAIN")]).unwrap();
        assert_eq!(config.protocol, SecurityProtocol::Plaintext);
        assert!(config.tls.is_none() && config.sasl.is_none());
    }
}
