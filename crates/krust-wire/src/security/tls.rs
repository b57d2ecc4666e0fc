//! TLS with rustls (ring, as the broker's listeners): the `ssl.*` settings of a Kafka client
//! with PEM stores (KIP-651), and the handshake on a connection.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::SecurityConfigError;
use crate::error::WireError;

/// Reads the PEM of an inline setting (`inline_key`) or of the file another one names
/// (`location_key`); at most one of the two may be given.
fn pem_setting<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    location_key: &str,
    inline_key: &str,
) -> Result<Option<(String, String)>, SecurityConfigError> {
    match (get(location_key), get(inline_key)) {
        (Some(_), Some(_)) => Err(SecurityConfigError::new(
            inline_key,
            format!("give either {location_key} or {inline_key}, not both"),
        )),
        (Some(path), None) => std::fs::read_to_string(path)
            .map(|pem| Some((location_key.to_string(), pem)))
            .map_err(|e| {
                SecurityConfigError::new(location_key, format!("cannot read {path}: {e}"))
            }),
        (None, Some(pem)) => Ok(Some((inline_key.to_string(), pem.to_string()))),
        (None, None) => Ok(None),
    }
}

/// `ssl.truststore.type` / `ssl.keystore.type`: PEM only (Kafka's default is JKS, which a
/// client outside the JVM cannot read).
fn check_pem_type<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    key: &str,
) -> Result<(), SecurityConfigError> {
    match get(key) {
        Some(kind) if !kind.trim().eq_ignore_ascii_case("PEM") => Err(SecurityConfigError::new(
            key,
            format!("only PEM stores are supported, not {kind:?}"),
        )),
        _ => Ok(()),
    }
}

fn certificates(key: &str, pem: &str) -> Result<Vec<CertificateDer<'static>>, SecurityConfigError> {
    let certificates: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| SecurityConfigError::new(key, format!("malformed PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(SecurityConfigError::new(key, "no PEM certificate in it"));
    }
    Ok(certificates)
}

/// The rustls client configuration of the `ssl.*` settings.
pub fn client_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<ClientConfig, SecurityConfigError> {
    check_pem_type(get, "ssl.truststore.type")?;
    check_pem_type(get, "ssl.keystore.type")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let Some((trust_key, trusted)) = pem_setting(
        get,
        "ssl.truststore.location",
        "ssl.truststore.certificates",
    )?
    else {
        return Err(SecurityConfigError::new(
            "ssl.truststore.location",
            "TLS needs the CA certificates that sign the brokers' certificates: give \
             ssl.truststore.location or ssl.truststore.certificates (PEM); the system's \
             trust store is not read",
        ));
    };
    let mut roots = RootCertStore::empty();
    for certificate in certificates(&trust_key, &trusted)? {
        roots
            .add(certificate)
            .map_err(|e| SecurityConfigError::new(&trust_key, e.to_string()))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| SecurityConfigError::new(&trust_key, e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> =
        match get("ssl.endpoint.identification.algorithm").map(str::trim) {
            None => verifier,
            Some(algorithm) if algorithm.eq_ignore_ascii_case("https") => verifier,
            Some("") => Arc::new(NoHostnameVerification(verifier)),
            Some(other) => {
                return Err(SecurityConfigError::new(
                    "ssl.endpoint.identification.algorithm",
                    format!("must be https or empty (no hostname verification), not {other:?}"),
                ))
            }
        };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SecurityConfigError::new("security.protocol", e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let keystore = key_and_chain(get)?;
    match keystore {
        None => Ok(builder.with_no_client_auth()),
        Some((key_name, chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| SecurityConfigError::new(key_name, e.to_string())),
    }
}

/// The client certificate chain and key (mTLS): from `ssl.keystore.location` (one PEM file
/// with both) or `ssl.keystore.certificate.chain` + `ssl.keystore.key`; the name of the
/// setting the key came from.
#[allow(clippy::type_complexity)]
fn key_and_chain<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<
    Option<(
        &'static str,
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
    )>,
    SecurityConfigError,
> {
    const LOCATION: &str = "ssl.keystore.location";
    const CHAIN: &str = "ssl.keystore.certificate.chain";
    const KEY: &str = "ssl.keystore.key";
    let (chain_key, chain_pem, key_key, key_pem) = match (get(LOCATION), get(CHAIN), get(KEY)) {
        (None, None, None) => return Ok(None),
        (Some(path), None, None) => {
            let pem = std::fs::read_to_string(path).map_err(|e| {
                SecurityConfigError::new(LOCATION, format!("cannot read {path}: {e}"))
            })?;
            (LOCATION, pem.clone(), LOCATION, pem)
        }
        (None, Some(chain), Some(key)) => (CHAIN, chain.to_string(), KEY, key.to_string()),
        (Some(_), _, _) => {
            return Err(SecurityConfigError::new(
                LOCATION,
                format!("give either {LOCATION} or {CHAIN} with {KEY}, not both"),
            ))
        }
        (None, Some(_), None) => {
            return Err(SecurityConfigError::new(
                KEY,
                format!("{CHAIN} needs the private key in {KEY}"),
            ))
        }
        (None, None, Some(_)) => {
            return Err(SecurityConfigError::new(
                CHAIN,
                format!("{KEY} needs the certificate chain in {CHAIN}"),
            ))
        }
    };
    let chain = certificates(chain_key, &chain_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| {
        SecurityConfigError::new(
            key_key,
            format!("no unencrypted PKCS#8, PKCS#1 or SEC1 private key in the PEM ({e})"),
        )
    })?;
    Ok(Some((key_key, chain, key)))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the broker's certificate must still be
/// signed by a trusted CA, but need not name the host connected to.
#[derive(Debug)]
struct NoHostnameVerification(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoHostnameVerification {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The TLS error inside an I/O error of a TLS stream, if that is what it is.
pub fn tls_cause(error: &std::io::Error) -> Option<&rustls::Error> {
    error.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Runs the TLS handshake with the broker at `address` (`host:port`) over `tcp`.
pub async fn handshake(
    config: &Arc<ClientConfig>,
    address: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, WireError> {
    let failed = |reason: String| WireError::Tls {
        address: address.to_string(),
        reason,
    };
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| failed(format!("{host:?} is not a host name for TLS: {e}")))?;
    TlsConnector::from(Arc::clone(config))
        .connect(name, tcp)
        .await
        .map_err(|e| failed(tls_reason(&e)))
}

/// What went wrong in TLS, with a hint at the setting to look at where there is one.
pub fn tls_reason(error: &std::io::Error) -> String {
    match tls_cause(error) {
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => format!(
            "{error}: the broker's certificate is not signed by a CA in ssl.truststore.location \
             / ssl.truststore.certificates"
        ),
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => format!(
            "{error}: the broker's certificate does not name this host (hostname verification, \
             ssl.endpoint.identification.algorithm)"
        ),
        Some(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
            | rustls::AlertDescription::BadCertificate
            | rustls::AlertDescription::UnknownCA,
        )) => format!(
            "{error}: the broker refused this client's certificate or its absence (ssl.keystore.*)"
        ),
        _ => error.to_string(),
    }
}
