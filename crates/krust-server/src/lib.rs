//! The krust broker core: network, request dispatch, native handlers, replica manager, and the
//! bridge to the Python controller and coordinators. Modules are listed bottom-up: each one
//! uses only modules above it (scripts/check_layout.py keeps it so).

// Foundations: time, settings, who is connected and what they may use.
pub mod clock;
pub mod quota;
pub mod security;
pub mod settings;

// Requests and metrics as every layer sees them; authorization; the way to Python.
pub mod authorizer;
pub mod bridge;
pub mod metrics;
pub mod request;

// Broker state: metadata, partitions, replicas, channels to other nodes, transactions.
pub mod controller_channel;
pub mod fetch_session;
pub mod metadata;
pub mod partition;
pub mod replica;
pub mod server_context;
pub mod transaction;

// The request path and the running broker: handlers, sockets, the bindings' face.
pub mod broker;
pub mod handlers;
pub mod network;
