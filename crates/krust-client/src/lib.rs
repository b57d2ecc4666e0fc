//! A small blocking Kafka client for bulk reads and writes in Arrow form: what the Spark data
//! source (spark/) runs on its executors. It speaks the Kafka protocol to any broker, so it
//! reads Apache Kafka as well as krust.
//!
//! Connections, TLS, SASL and the `security.protocol`, `ssl.*` and `sasl.*` settings are
//! krust-wire's ([`krust_wire::blocking`]): this crate only says what to ask.
//!
//! - [`client`]: bootstrap, cluster metadata and a connection per partition leader.
//! - [`list_offsets`]: earliest, latest and by-timestamp offsets.
//! - [`fetch`]: an offset range `[start, end)` of one partition.
//! - [`decode`]: record batches (any codec) into [`columns::RecordColumns`], Spark's
//!   Kafka source schema in Arrow.
//! - [`transactions`]: read_committed, leaving out aborted transactions.
//! - [`produce`]: an Arrow batch of rows (Spark's Kafka sink schema) produced with acks=all.
//! - [`transactional`]: the transactional producer (exactly-once sink writes).

pub mod client;
pub mod columns;
pub mod decode;
pub mod error;
pub mod fetch;
pub mod list_offsets;
mod partitioner;
pub mod produce;
mod sink_rows;
mod transaction_state;
pub mod transactional;
pub mod transactions;

pub use client::{ClientConfig, KafkaClient, PartitionInfo};
pub use columns::{source_schema, RecordColumns};
pub use error::ClientError;
pub use fetch::FetchOptions;
pub use krust_wire::security;
pub use krust_wire::{SecurityConfig, SecurityConfigError};
pub use list_offsets::OffsetSpec;
pub use produce::ProduceOptions;
