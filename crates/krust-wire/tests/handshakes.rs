//! What happens before the first request against an in-process fake node: ApiVersions with
//! the KIP-511 fallback, SASL PLAIN and SCRAM answered by this crate's server-side
//! mechanisms, and TLS with PEM certificates.

mod common;

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{answer, cert, start, start_with, Action, Handler};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use krust_wire::sasl::{
    plain, SaslMechanism, ScramCredential, ScramMechanism, ScramServer, ScramStep,
};
use krust_wire::{Connection, ConnectionConfig, SaslCredentials, SecurityConfig, WireError};

fn range(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

#[tokio::test]
async fn api_versions_falls_back_to_the_version_the_node_takes() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let node = start(Arc::new(move |h: &RequestHeader, _| {
        assert_eq!(h.request_api_key, ApiKey::ApiVersions as i16);
        seen.lock().unwrap().push(h.request_api_version);
        let v0 = h.clone().with_request_api_version(0);
        Action::Answer(
            Duration::ZERO,
            if h.request_api_version > 3 {
                // KIP-511: an unknown version is answered in v0 with the node's range.
                answer(
                    &v0,
                    &ApiVersionsResponse::default()
                        .with_error_code(ResponseError::UnsupportedVersion.code())
                        .with_api_keys(vec![range(ApiKey::ApiVersions, 0, 3)]),
                )
            } else {
                answer(
                    h,
                    &ApiVersionsResponse::default().with_api_keys(vec![
                        range(ApiKey::ApiVersions, 0, 3),
                        range(ApiKey::Metadata, 0, 9),
                    ]),
                )
            },
        )
    }))
    .await;
    let mut config = ConnectionConfig::new("test");
    config.negotiate_versions = true;
    let connection = Connection::connect(&node.address, Arc::new(config))
        .await
        .unwrap();
    assert_eq!(*asked.lock().unwrap(), [4, 3]);
    assert_eq!(connection.version::<MetadataRequest>(4, 12).unwrap(), 9);
    assert!(matches!(
        connection.version::<MetadataRequest>(10, 12),
        Err(WireError::NoCommonVersion { .. })
    ));
}

/// A node that authenticates alice (password "alice-secret") with PLAIN and SCRAM-SHA-512
/// through the mechanisms' server halves, then answers Metadata.
fn sasl_node() -> Handler {
    let iterations = NonZeroU32::new(4096).unwrap();
    let stored =
        ScramCredential::derive(ScramMechanism::Sha512, "alice-secret", b"salt", iterations);
    let exchange: Arc<Mutex<Option<SaslMechanism>>> = Arc::default();
    let scram: Arc<Mutex<Option<ScramServer>>> = Arc::default();
    Arc::new(move |h: &RequestHeader, mut body: Bytes| {
        let version = h.request_api_version;
        let reply = match ApiKey::try_from(h.request_api_key).unwrap() {
            ApiKey::SaslHandshake => {
                let request = SaslHandshakeRequest::decode(&mut body, version).unwrap();
                let mechanism = SaslMechanism::from_name(request.mechanism.as_str());
                *exchange.lock().unwrap() = mechanism;
                if let Some(SaslMechanism::Scram(scram_mechanism)) = mechanism {
                    *scram.lock().unwrap() = Some(ScramServer::new(scram_mechanism));
                }
                answer(h, &SaslHandshakeResponse::default())
            }
            ApiKey::SaslAuthenticate => {
                let request = SaslAuthenticateRequest::decode(&mut body, version).unwrap();
                let refused = |message: String| {
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                };
                let response = match exchange.lock().unwrap().unwrap() {
                    SaslMechanism::Plain => match plain::parse(&request.auth_bytes) {
                        Ok((user, password)) if user == "alice" && password == "alice-secret" => {
                            SaslAuthenticateResponse::default()
                        }
                        Ok(_) => {
                            refused("Authentication failed: Invalid username or password".into())
                        }
                        Err(e) => refused(e.to_string()),
                    },
                    SaslMechanism::Scram(_) => {
                        let mut server = scram.lock().unwrap();
                        let lookup = |user: &str, _| (user == "alice").then(|| stored.clone());
                        match server
                            .as_mut()
                            .unwrap()
                            .evaluate(&request.auth_bytes, lookup)
                        {
                            Ok(ScramStep::Challenge(bytes)) => {
                                SaslAuthenticateResponse::default().with_auth_bytes(bytes.into())
                            }
                            Ok(ScramStep::Done { server_final, .. }) => {
                                SaslAuthenticateResponse::default()
                                    .with_auth_bytes(server_final.into())
                            }
                            Err(e) => refused(e.to_string()),
                        }
                    }
                };
                answer(h, &response)
            }
            ApiKey::Metadata => answer(h, &MetadataResponse::default()),
            other => panic!("unexpected {other:?}"),
        };
        Action::Answer(Duration::ZERO, reply)
    })
}

fn with_sasl(mechanism: SaslMechanism, password: &str) -> Arc<ConnectionConfig> {
    let security = SecurityConfig {
        sasl: Some(SaslCredentials::new(mechanism, "alice", password)),
        ..SecurityConfig::default()
    };
    Arc::new(ConnectionConfig::new("test").with_security(Arc::new(security)))
}

#[tokio::test]
async fn sasl_plain_and_scram_authenticate_against_the_server_mechanisms() {
    for mechanism in [
        SaslMechanism::Plain,
        SaslMechanism::Scram(ScramMechanism::Sha512),
    ] {
        let node = start(sasl_node()).await;
        let connection = Connection::connect(&node.address, with_sasl(mechanism, "alice-secret"))
            .await
            .unwrap();
        connection
            .send(&MetadataRequest::default(), 12)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_wrong_password_fails_with_the_nodes_message() {
    let node = start(sasl_node()).await;
    let config = with_sasl(SaslMechanism::Scram(ScramMechanism::Sha512), "wrong");
    let error = Connection::connect(&node.address, config)
        .await
        .err()
        .unwrap();
    let message = error.to_string();
    assert!(
        matches!(error, WireError::Authentication { .. }),
        "{message}"
    );
    assert!(
        message.contains("SASL authentication with SCRAM-SHA-512"),
        "{message}"
    );
    assert!(message.contains("invalid credentials with SASL mechanism SCRAM-SHA-512"));
    let node = start(sasl_node()).await;
    let error = Connection::connect(&node.address, with_sasl(SaslMechanism::Plain, "wrong"))
        .await
        .err()
        .unwrap();
    assert!(
        error.to_string().contains("Invalid username or password"),
        "{error}"
    );
}

fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(cert("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

fn with_tls(truststore: &str) -> Arc<ConnectionConfig> {
    let properties = BTreeMap::from([
        ("security.protocol".to_string(), "SSL".to_string()),
        ("ssl.truststore.type".to_string(), "PEM".to_string()),
        ("ssl.truststore.location".to_string(), cert(truststore)),
    ]);
    let security = SecurityConfig::from_properties(&properties).unwrap();
    Arc::new(ConnectionConfig::new("test").with_security(Arc::new(security)))
}

#[tokio::test]
async fn tls_connects_to_a_node_whose_certificate_the_trust_store_signs() {
    let handler: Handler =
        Arc::new(|h, _| Action::Answer(Duration::ZERO, answer(h, &MetadataResponse::default())));
    let node = start_with(handler, Some(tls_acceptor())).await;
    let port = node.address.rsplit_once(':').unwrap().1;
    for host in ["localhost", "127.0.0.1"] {
        let connection = Connection::connect(&format!("{host}:{port}"), with_tls("ca.pem"))
            .await
            .unwrap();
        connection
            .send(&MetadataRequest::default(), 12)
            .await
            .unwrap();
    }
    // The server's own certificate is no CA: nothing it would sign is trusted.
    let error = Connection::connect(&format!("localhost:{port}"), with_tls("server.pem"))
        .await
        .err()
        .unwrap();
    assert!(matches!(error, WireError::Tls { .. }), "{error}");
}
