//! Opening a connection to a node, in Kafka's order: TCP, TLS when `security.protocol` asks
//! for it, ApiVersions when the config asks to negotiate (KIP-35), then SASL (KIP-43, KIP-152).
//!
//! KIP-511: the client sends its newest ApiVersions version. A node that does not know that
//! version answers in the v0 format with UNSUPPORTED_VERSION and, where it can, its own
//! ApiVersions range; the client then asks again at the highest version the node takes (v0
//! when it said nothing).

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Message, Request, StrBytes};
use tokio::net::TcpStream;

use crate::authenticate::authenticate;
use crate::config::ConnectionConfig;
use crate::connection::{Connection, Stream};
use crate::error::{ApiName, WireError};
use crate::frame;
use crate::security::tls;
use crate::versions::ApiVersionsTable;

/// The name and version clients report in ApiVersions v3+ (KIP-511).
const SOFTWARE_NAME: &str = "krust-wire";
const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

impl Connection {
    /// Connects to `address` (`host:port`) as `config` says, within its request timeout.
    pub async fn connect(address: &str, config: Arc<ConnectionConfig>) -> Result<Self, WireError> {
        let timeout = config.request_timeout;
        match tokio::time::timeout(timeout, Self::establish(address, config)).await {
            Ok(connected) => connected,
            Err(_) => Err(WireError::Connect {
                address: address.to_string(),
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not connected within {} ms", timeout.as_millis()),
                ),
            }),
        }
    }

    async fn establish(address: &str, config: Arc<ConnectionConfig>) -> Result<Self, WireError> {
        let connect_error = |source| WireError::Connect {
            address: address.to_string(),
            source,
        };
        let tcp = TcpStream::connect(address).await.map_err(connect_error)?;
        tcp.set_nodelay(true).map_err(connect_error)?;
        let stream: Stream = match &config.security.tls {
            Some(tls_config) => Box::new(tls::handshake(tls_config, address, tcp).await?),
            None => Box::new(tcp),
        };
        let mut connection = Self::over(address, stream, config);
        if connection.config.negotiate_versions {
            connection.versions = Some(negotiate(&connection).await?);
        }
        if let Some(credentials) = connection.config.security.sasl.clone() {
            authenticate(&connection, &credentials).await?;
        }
        Ok(connection)
    }
}

/// Asks the node at the other end of `connection` for its ApiVersions.
pub async fn negotiate(connection: &Connection) -> Result<ApiVersionsTable, WireError> {
    let newest = ApiVersionsRequest::VERSIONS.max;
    let first = ask(connection, newest).await?;
    let response = match ResponseError::try_from_code(first.error_code) {
        Some(ResponseError::UnsupportedVersion) => {
            let theirs = ApiVersionsTable::from_response(&first)
                .range(ApiVersionsRequest::KEY)
                .map_or(0, |(_, max)| max.min(newest));
            ask(connection, theirs).await?
        }
        _ => first,
    };
    match ResponseError::try_from_code(response.error_code) {
        None => Ok(ApiVersionsTable::from_response(&response)),
        Some(error) => Err(WireError::ApiVersions {
            address: connection.address().to_string(),
            error,
        }),
    }
}

/// One ApiVersions request at `version`; the answer is read at `version`, or in the v0
/// format an UNSUPPORTED_VERSION answer comes in.
async fn ask(connection: &Connection, version: i16) -> Result<ApiVersionsResponse, WireError> {
    let api = ApiName(ApiVersionsRequest::KEY);
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(SOFTWARE_NAME))
        .with_client_software_version(StrBytes::from_static_str(SOFTWARE_VERSION));
    let frame = connection
        .round_trip(api, |correlation_id| {
            let header = RequestHeader::default()
                .with_request_api_key(ApiVersionsRequest::KEY)
                .with_request_api_version(version)
                .with_correlation_id(correlation_id)
                .with_client_id(Some(StrBytes::from_static_str(SOFTWARE_NAME)));
            frame::encode_request(&header, &request, version)
        })
        .await?;
    // The ApiVersions response header is always v0: the correlation id alone.
    let body: Bytes = frame.slice(4.min(frame.len())..);
    let at = |v: i16| ApiVersionsResponse::decode(&mut body.clone(), v);
    match at(version) {
        Ok(response) if response.error_code == 0 || version == 0 => Ok(response),
        first => at(0).or(first).map_err(|e| WireError::Codec {
            api,
            address: connection.address().to_string(),
            reason: e.to_string(),
        }),
    }
}
