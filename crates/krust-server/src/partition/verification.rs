//! KIP-890's verification guard. A transactional batch that would start a transaction on this
//! partition is appended only after the transaction coordinator confirmed the partition is in
//! the producer's transaction. The transaction may end (its marker appended) while the leader
//! waits for that answer; the guard makes the append see it: a marker clears the producer's
//! guard, and an append whose guard is gone is refused, so a batch can never open a
//! transaction after its marker (Kafka's `VerificationGuard`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use krust_storage::LogAppendInfo;
use parking_lot::Mutex;

use crate::partition::{Partition, PartitionError};

/// The producers whose first batch here is being verified, with their current guard.
#[derive(Debug, Default)]
pub(crate) struct VerificationGuards {
    next: AtomicU64,
    guards: Mutex<HashMap<i64, u64>>,
}

/// Proof that a verification started on this partition, to present at the append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationGuard {
    producer_id: i64,
    id: u64,
}

impl Partition {
    /// A guard for verifying producer `producer_id`'s batch at `producer_epoch` with the
    /// coordinator; `None` when the producer already has a transaction open here (nothing to
    /// verify).
    pub fn start_transaction_verification(
        &self,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Option<VerificationGuard> {
        if self.has_ongoing_transaction(producer_id, producer_epoch) {
            return None;
        }
        let guards = &self.verification;
        let id = guards.next.fetch_add(1, Ordering::Relaxed);
        guards.guards.lock().insert(producer_id, id);
        Some(VerificationGuard { producer_id, id })
    }

    /// The producer's transaction ended (its marker is being appended): a verification under
    /// way for it no longer lets its batch in.
    pub fn end_transaction_verification(&self, producer_id: i64) {
        self.verification.guards.lock().remove(&producer_id);
    }

    /// Appends a verified client batch, unless the producer's transaction ended since its
    /// verification started (INVALID_TXN_STATE). The guard is held through the append, so a
    /// marker is appended either before the check or after this batch.
    pub fn append_verified(
        &self,
        records: &[u8],
        required_acks: i16,
        now_ms: i64,
        guard: VerificationGuard,
    ) -> Result<LogAppendInfo, PartitionError> {
        let mut guards = self.verification.guards.lock();
        if guards.get(&guard.producer_id) != Some(&guard.id) {
            return Err(PartitionError::TransactionEnded {
                producer_id: guard.producer_id,
            });
        }
        let info = self.append_as_leader(records, required_acks, now_ms)?;
        guards.remove(&guard.producer_id);
        Ok(info)
    }
}
