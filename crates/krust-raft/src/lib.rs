//! The KRaft controller quorum: Raft (openraft) over `controller.quorum.voters`, with the
//! metadata log `__cluster_metadata-0` as the Raft log in Kafka's own format (docs/quorum.md).
//!
//! One Raft entry is one record batch holding one record: the batch's partitionLeaderEpoch is
//! the Raft term and the record's offset is the Raft index, so a metadata offset is a Raft
//! index and a Kafka leader epoch is a Raft term (one leader per term, `leader_id_std`).

use std::fmt;

use bytes::Bytes;

pub mod codec;
pub mod log_backend;
pub mod log_store;
pub mod metadata_fetch;
pub mod network;
pub mod observer;
pub mod quorum;
pub mod quorum_state;
pub mod state_machine;
pub mod voters;
pub mod wire;

pub use log_backend::{KafkaLogBackend, LogBackend, MemLogBackend};
pub use log_store::LogStore;
/// The pinned openraft, for the crates that drive the quorum (metrics, messages).
pub use openraft;
pub use state_machine::{AppliedRecord, Applier, ApplyError, StateMachine};
pub use voters::{StaticVoters, Voter, VotersError};

/// A Kafka node id (`node.id`).
pub type NodeId = i32;

/// One metadata record's value, as KIP-631 frames it: the app data of a normal entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRecord(pub Bytes);

impl fmt::Display for MetadataRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "metadata record of {} bytes", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// krust's Raft types: Kafka node ids, one leader per term (the term is Kafka's leader
    /// epoch), entries holding one metadata record.
    pub KRaft:
        D = MetadataRecord,
        R = (),
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Term = u64,
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, NodeId>,
);

pub type Entry = openraft::type_config::alias::EntryOf<KRaft>;
pub type LogId = openraft::type_config::alias::LogIdOf<KRaft>;
pub type LogIdCommitted = openraft::type_config::alias::CommittedLeaderIdOf<KRaft>;
pub type Vote = openraft::type_config::alias::VoteOf<KRaft>;
pub type Membership = openraft::Membership<NodeId, openraft::BasicNode>;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<KRaft>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<KRaft>;
pub type Raft = openraft::Raft<KRaft, StateMachine>;

/// The Kafka leader epoch of a Raft term; terms past i32::MAX cannot be written in Kafka's
/// format.
pub fn epoch_of(term: u64) -> std::io::Result<i32> {
    i32::try_from(term).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("raft term {term} does not fit a Kafka leader epoch"),
        )
    })
}

/// Milliseconds since the Unix epoch; 0 if the clock is set before 1970.
pub(crate) fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn invalid_data(message: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.into())
}
