//! The krust broker core: network, request dispatch, native handlers, replica manager, and the
//! bridge to the Python controller and coordinators. Modules are listed bottom-up: each one
//! uses only modules above it.

// Foundations: time, quotas, settings, who is connected.
pub mod clock;
pub mod connection_limits;
pub mod node_channel;
pub mod quota;
pub mod security;
pub mod session;
pub mod settings;

// Broker state: metadata, partitions, waiting requests, fetch sessions, producer ids.
pub mod alter_partition;
pub mod authorizer;
pub mod bridge;
pub mod broker_channels;
pub mod controller_route;
pub mod fetch_session;
pub mod metadata_cache;
pub mod metadata_log;
pub mod metrics;
pub mod partition;
pub mod partition_verification;
pub mod producer_ids;
pub mod purgatory;
pub mod replica;
pub mod replica_fetcher;
pub mod replica_manager;
pub mod routing;
pub mod server_context;

// The request path: context in, handlers, routing of frames, sockets, the running server.
pub mod broker;
pub mod broker_transactions;
pub mod controller_quorum;
pub mod dispatch;
pub mod forwarding;
pub mod handlers;
pub mod network;
pub mod request_context;
pub mod response_frame;
pub mod server;
pub mod throttling;
pub mod transaction_verification;
