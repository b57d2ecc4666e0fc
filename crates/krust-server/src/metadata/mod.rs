//! The broker's view of cluster metadata: the metadata cache the controller's deltas update
//! and the metadata log (`__cluster_metadata`) settings and snapshots. What acts on a change
//! (the replica manager, the controller channels) lives in `replica` and `controller_channel`.

pub mod metadata_cache;
pub mod metadata_log;
