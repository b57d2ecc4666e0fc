//! A blocking facade over [`crate::Connection`] for threads that are not async: the Spark
//! data source's executors (Python threads) and the replica fetcher threads.
//!
//! Each connection runs on its own single-threaded tokio runtime, made when it connects and
//! driven only while a call waits. tokio does not survive fork() (PySpark forks its Python
//! workers), so nothing here is made before a connection is opened in the process that uses
//! it.

use std::sync::Arc;

use kafka_protocol::protocol::Request;
use tokio::runtime::Runtime;

use crate::config::ConnectionConfig;
use crate::connection::Connection;
use crate::error::WireError;

/// A [`Connection`] whose calls block the calling thread.
pub struct BlockingConnection {
    // Dropped before the runtime it runs on.
    connection: Connection,
    runtime: Runtime,
}

impl BlockingConnection {
    /// Connects to `address` as `config` says. Must not be called on an async runtime's
    /// thread.
    pub fn connect(address: &str, config: Arc<ConnectionConfig>) -> Result<Self, WireError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| WireError::Connect {
                address: address.to_string(),
                source,
            })?;
        let connection = runtime.block_on(Connection::connect(address, config))?;
        Ok(Self {
            connection,
            runtime,
        })
    }

    /// The node's `host:port`.
    pub fn address(&self) -> &str {
        self.connection.address()
    }

    /// Sends `request` at `version` and waits for its response.
    pub fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, WireError> {
        self.runtime
            .block_on(self.connection.send(request, version))
    }

    /// [`Connection::send_raw`], blocking.
    pub fn send_raw(
        &mut self,
        api_key: i16,
        version: i16,
        header_versions: (i16, i16),
        body: &[u8],
        timeout: std::time::Duration,
    ) -> Result<bytes::Bytes, WireError> {
        self.runtime.block_on(self.connection.send_raw(
            api_key,
            version,
            header_versions,
            body,
            timeout,
        ))
    }

    /// Whether the connection broke or was closed.
    pub fn is_closed(&self) -> bool {
        self.connection.is_closed()
    }

    /// The async connection, for what the facade does not offer.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }
}
