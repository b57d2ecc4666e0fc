//! What a transactional producer remembers of its open transaction, kept in the client's
//! producer state (`client`) and changed by the transactional calls (`transactional`).

use std::collections::HashSet;

/// The open transaction of a transactional producer.
#[derive(Debug)]
pub(crate) struct TransactionState {
    pub(crate) transactional_id: String,
    /// Partitions added to the current transaction (AddPartitionsToTxn).
    pub(crate) added: HashSet<(String, i32)>,
    /// Whether anything (records or offsets) was added since the last EndTxn.
    pub(crate) open: bool,
}
