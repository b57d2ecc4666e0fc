//! Client quotas (KIP-13, KIP-55, KIP-124, KIP-219): which quota applies to a client, the
//! rates clients are metered by, the throttle time of a request over its quota, replication
//! throttles and connection limits. Charging a request is `handlers::throttling`'s.

pub mod connection_limits;
pub mod entities;
pub mod manager;
pub mod rate;
pub mod replication;

pub use entities::{ClientQuotaTable, ClientQuotaType};
pub use manager::ClientQuotaManager;
pub use rate::QuotaWindow;
pub use replication::{ReplicationQuota, ReplicationQuotas};
