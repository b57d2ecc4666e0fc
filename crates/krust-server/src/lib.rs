//! The krust broker core: network, request dispatch, native handlers, replica manager, and the
//! bridge to the Python controller and coordinators.

pub mod bridge;
pub mod broker;
pub mod dispatch;
pub mod fetch_session;
pub mod handlers;
pub mod metadata_cache;
pub mod network;
pub mod partition;
pub mod producer_ids;
pub mod purgatory;
pub mod replica_manager;
pub mod response_frame;
pub mod server;
pub mod settings;
