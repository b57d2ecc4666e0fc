//! One connection to a broker (TCP, TLS per `security.protocol`, authenticated with SASL when
//! it asks for it): requests are sent one at a time and their responses read back in order,
//! which is all a bulk reader or writer on one executor thread needs.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::config::ClientConfig;
use crate::error::ClientError;
use crate::security::tls;

mod sasl;

/// The largest response accepted: a Fetch asks for at most `fetch.max.bytes` (50 MiB by
/// default) plus one oversized batch per partition (KIP-74), so this leaves room for both.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

enum Stream {
    Tcp(TcpStream),
    Tls(Box<tls::TlsStream>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

pub struct Connection {
    address: String,
    stream: Stream,
    client_id: StrBytes,
    next_correlation_id: i32,
}

impl Connection {
    /// Connects to `address` (`host:port`) as `config` says: TLS and SASL authentication
    /// when its `security.protocol` asks for them.
    pub fn connect(address: &str, config: &ClientConfig) -> Result<Self, ClientError> {
        let tcp = Self::connect_tcp(address, config.request_timeout)?;
        let stream = match &config.security.tls {
            Some(tls_config) => Stream::Tls(Box::new(tls::handshake(tls_config, address, tcp)?)),
            None => Stream::Tcp(tcp),
        };
        let mut connection = Self {
            address: address.to_string(),
            stream,
            client_id: StrBytes::from_string(config.client_id.clone()),
            next_correlation_id: 0,
        };
        if let Some(credentials) = &config.security.sasl {
            sasl::authenticate(&mut connection, credentials)?;
        }
        Ok(connection)
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// A TCP connection to `address`, trying each address it resolves to.
    fn connect_tcp(address: &str, timeout: Duration) -> Result<TcpStream, ClientError> {
        let connect_error = |source| ClientError::Connect {
            address: address.to_string(),
            source,
        };
        let mut last = std::io::Error::other("the address resolves to nothing");
        for resolved in address.to_socket_addrs().map_err(connect_error)? {
            match TcpStream::connect_timeout(&resolved, timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true).map_err(connect_error)?;
                    stream
                        .set_read_timeout(Some(timeout))
                        .map_err(connect_error)?;
                    stream
                        .set_write_timeout(Some(timeout))
                        .map_err(connect_error)?;
                    return Ok(stream);
                }
                Err(e) => last = e,
            }
        }
        Err(connect_error(last))
    }

    /// Sends `request` at `version` and reads its response.
    pub fn send<R: Request>(
        &mut self,
        api: &'static str,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| self.codec_error(api, &e))?;
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream
            .write_all(&frame)
            .map_err(|e| self.io_error(e))?;

        let mut body = self.read_frame()?;
        let response_header =
            ResponseHeader::decode(&mut body, R::Response::header_version(version))
                .map_err(|e| self.codec_error(api, &e))?;
        if response_header.correlation_id != correlation_id {
            return Err(ClientError::CorrelationMismatch {
                api,
                address: self.address.clone(),
                expected: correlation_id,
                got: response_header.correlation_id,
            });
        }
        R::Response::decode(&mut body, version).map_err(|e| self.codec_error(api, &e))
    }

    fn read_frame(&mut self) -> Result<Bytes, ClientError> {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|e| self.io_error(e))?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size > MAX_RESPONSE_BYTES {
            return Err(ClientError::ResponseTooLarge {
                address: self.address.clone(),
                size,
                limit: MAX_RESPONSE_BYTES,
            });
        }
        let mut body = vec![0u8; size];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| self.io_error(e))?;
        Ok(Bytes::from(body))
    }

    fn io_error(&self, source: std::io::Error) -> ClientError {
        if tls::tls_cause(&source).is_some() {
            return ClientError::Tls {
                address: self.address.clone(),
                reason: tls::tls_reason(&source),
            };
        }
        ClientError::Io {
            address: self.address.clone(),
            source,
        }
    }

    fn codec_error(&self, api: &'static str, error: &impl std::fmt::Display) -> ClientError {
        ClientError::Codec {
            api,
            address: self.address.clone(),
            reason: error.to_string(),
        }
    }
}
