//! krust-wire: the one way krust talks to a Kafka node, as a client. The Spark data source's
//! client (krust-client), the broker's replica fetchers and controller channels
//! (krust-server) and the quorum's network (krust-raft) all connect through it.
//!
//! - [`frame`]: size-prefixed frames, with a bound on a response's size.
//! - [`connection`]: one connection (TCP, TLS, ApiVersions, SASL), pipelined requests with
//!   checked correlation ids, request timeouts and a bound on requests in flight.
//! - [`handshake`]: opening a connection: TCP, TLS, ApiVersions (KIP-35, KIP-511), SASL.
//! - [`versions`]: what a node's ApiVersions answer says.
//! - [`authenticate`]: SaslHandshake + SaslAuthenticate (KIP-43, KIP-152).
//! - [`sasl`]: the PLAIN and SCRAM mechanisms, both sides (the broker's authenticator uses
//!   the server halves).
//! - [`security`]: `security.protocol`, `ssl.*` and `sasl.*` client settings, TLS with
//!   rustls.
//! - [`reconnect`]: a node's connection that reopens itself with backoff (KIP-144).
//! - [`blocking`]: the same connection for threads that are not async.
//! - [`config`] and [`error`]: what a connection is opened with, and how it fails.

pub mod authenticate;
pub mod blocking;
pub mod config;
pub mod connection;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod reconnect;
pub mod sasl;
pub mod security;
pub mod versions;

pub use blocking::BlockingConnection;
pub use config::ConnectionConfig;
pub use connection::Connection;
pub use error::{ApiName, AuthenticationError, WireError};
pub use reconnect::{Backoff, Reconnecting};
pub use security::{SaslCredentials, SecurityConfig, SecurityConfigError, SecurityProtocol};
pub use versions::ApiVersionsTable;
