//! TLS listeners with rustls: the server certificate and key from PEM, the truststore that
//! verifies client certificates (ssl.client.auth), and the principal of a client certificate.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::principal_mapping::{certificate_subject, PrincipalMapper};
use super::SecurityConfigError;
use crate::security::session::KafkaPrincipal;

/// ssl.client.auth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A listener's ssl.* settings, PEM text already read from the files they name.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// ssl.keystore.certificate.chain (or the certificates in ssl.keystore.location).
    pub certificate_chain: String,
    /// ssl.keystore.key (or the private key in ssl.keystore.location).
    pub private_key: String,
    /// ssl.truststore.certificates (or ssl.truststore.location).
    pub trusted_certificates: Option<String>,
    pub client_auth: ClientAuth,
    /// ssl.principal.mapping.rules
    pub principal_mapping_rules: String,
}

/// A TLS listener, ready to accept.
pub struct TlsListener {
    pub acceptor: TlsAcceptor,
    mapper: PrincipalMapper,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("config", self.acceptor.config())
            .field("mapper", &self.mapper)
            .finish()
    }
}

/// Why a client's certificate gives no principal.
#[derive(Debug, thiserror::Error)]
pub enum PrincipalError {
    #[error(transparent)]
    Certificate(#[from] super::principal_mapping::CertificateError),
    #[error("no ssl.principal.mapping.rules rule matches the client certificate subject {0:?}")]
    NoRule(String),
}

fn invalid(key: &'static str, problem: impl ToString) -> SecurityConfigError {
    SecurityConfigError::Invalid {
        key,
        problem: problem.to_string(),
    }
}

impl TlsListener {
    pub fn new(settings: &TlsSettings) -> Result<Self, SecurityConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(settings.certificate_chain.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|error| invalid("ssl.keystore.certificate.chain", error))?;
        if chain.is_empty() {
            return Err(invalid(
                "ssl.keystore.certificate.chain",
                "no certificate in the PEM",
            ));
        }
        let key =
            PrivateKeyDer::from_pem_slice(settings.private_key.as_bytes()).map_err(|error| {
                invalid(
                    "ssl.keystore.key",
                    format!(
                        "no unencrypted PKCS#8, PKCS#1 or SEC1 private key in the PEM ({error})"
                    ),
                )
            })?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| invalid("ssl.keystore.certificate.chain", error))?;
        let builder = match (settings.client_auth, &settings.trusted_certificates) {
            (ClientAuth::None, _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(invalid(
                    "ssl.client.auth",
                    "requested or required needs ssl.truststore.location or ssl.truststore.certificates",
                ))
            }
            (auth, Some(pem)) => {
                let mut roots = RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    let certificate =
                        certificate.map_err(|error| invalid("ssl.truststore.certificates", error))?;
                    roots
                        .add(certificate)
                        .map_err(|error| invalid("ssl.truststore.certificates", error))?;
                }
                if roots.is_empty() {
                    return Err(invalid("ssl.truststore.certificates", "no certificate in the PEM"));
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = match auth {
                    ClientAuth::Requested => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                let verifier = verifier
                    .build()
                    .map_err(|error| invalid("ssl.truststore.certificates", error))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|error| invalid("ssl.keystore.key", error))?;
        Ok(TlsListener {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            mapper: PrincipalMapper::parse(&settings.principal_mapping_rules)?,
        })
    }

    /// The principal of a TLS connection: `User:` + the mapped subject of the client
    /// certificate, `User:ANONYMOUS` when the client sent none (as Kafka's default builder).
    pub fn principal(
        &self,
        client_chain: Option<&[CertificateDer<'_>]>,
    ) -> Result<KafkaPrincipal, PrincipalError> {
        let Some(certificate) = client_chain.and_then(|chain| chain.first()) else {
            return Ok(KafkaPrincipal::anonymous());
        };
        let subject = certificate_subject(certificate)?;
        let name = self
            .mapper
            .map(&subject)
            .ok_or(PrincipalError::NoRule(subject))?;
        Ok(KafkaPrincipal::user(name))
    }
}
