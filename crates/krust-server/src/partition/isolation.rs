//! How far a consumer's read of a partition may go: the high watermark (read_uncommitted) or
//! the last stable offset (read_committed, KIP-98), as Kafka's `FetchIsolation`.

use krust_storage::{AbortedTxn, FetchDataInfo, Log};

/// How far a consumer may read (Kafka's `FetchIsolation`; followers read to the log end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchIsolation {
    /// read_uncommitted: up to the high watermark.
    HighWatermark,
    /// read_committed: up to the last stable offset (KIP-98).
    TxnCommitted,
}

impl FetchIsolation {
    /// The isolation a Fetch or ListOffsets `isolation_level` asks for (1: read_committed).
    pub fn from_isolation_level(isolation_level: i8) -> Self {
        if isolation_level == 1 {
            Self::TxnCommitted
        } else {
            Self::HighWatermark
        }
    }
}

/// The end of what a ListOffsets lookup may answer (Kafka's `lastFetchableOffset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastFetchable {
    /// A consumer's, by its isolation level.
    Consumer(FetchIsolation),
    /// A replica's (or a debugging tool's): the log end.
    LogEnd,
}

impl LastFetchable {
    pub(super) fn offset_in(self, log: &Log) -> i64 {
        match self {
            Self::Consumer(FetchIsolation::HighWatermark) => log.high_watermark(),
            Self::Consumer(FetchIsolation::TxnCommitted) => log.last_stable_offset(),
            Self::LogEnd => log.log_end_offset(),
        }
    }
}

/// A consumer's read: the batches, and for read_committed the aborted transactions they
/// overlap (`None` for read_uncommitted, as Kafka answers).
#[derive(Clone, Debug)]
pub struct ConsumerRead {
    pub data: FetchDataInfo,
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}
