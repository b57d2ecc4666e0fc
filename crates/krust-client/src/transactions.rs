//! read_committed (KIP-98): a Fetch response lists the aborted transactions overlapping it, as
//! (producer id, first offset); a transactional batch of such a producer, from that offset up to
//! the producer's abort marker, is left out, as Kafka's consumer leaves it out.

use std::collections::HashSet;

use krust_storage::batch::BatchHeader;
use krust_storage::control_batch::{control_record_type, ABORT};
use krust_storage::records::record_views;
use krust_storage::{records_area, BatchError, MAX_DECOMPRESSED_BYTES};

/// The aborted transactions of one Fetch response, consumed in offset order.
#[derive(Debug, Default)]
pub struct AbortedTransactions {
    /// (first offset, producer id), sorted so the lowest first offset is last.
    pending: Vec<(i64, i64)>,
    /// Producers whose aborted transaction has started and whose marker is not yet seen.
    open: HashSet<i64>,
}

impl AbortedTransactions {
    /// From the response's (producer id, first offset) list; empty for read_uncommitted.
    pub fn new(aborted: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut pending: Vec<(i64, i64)> = aborted
            .into_iter()
            .map(|(producer_id, first_offset)| (first_offset, producer_id))
            .collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        Self {
            pending,
            open: HashSet::new(),
        }
    }

    /// Whether the records of `batch` (whose header is `header`) are left out: a batch of an
    /// aborted transaction. Control batches are always left out; an abort marker closes its
    /// producer's transaction.
    pub fn skips(&mut self, header: &BatchHeader, batch: &[u8]) -> Result<bool, BatchError> {
        if !header.has_producer_id() {
            return Ok(header.is_control());
        }
        while let Some(&(first_offset, producer_id)) = self.pending.last() {
            if first_offset > header.last_offset() {
                break;
            }
            self.open.insert(producer_id);
            self.pending.pop();
        }
        if header.is_control() {
            if is_abort_marker(header, batch)? {
                self.open.remove(&header.producer_id);
            }
            return Ok(true);
        }
        Ok(header.is_transactional() && self.open.contains(&header.producer_id))
    }
}

/// A control batch's record key: version i16, type i16.
fn is_abort_marker(header: &BatchHeader, batch: &[u8]) -> Result<bool, BatchError> {
    let area = records_area(batch, header, MAX_DECOMPRESSED_BYTES)?;
    let Some(marker) = record_views(&area).next().transpose()? else {
        return Ok(false);
    };
    Ok(marker.key.and_then(control_record_type) == Some(ABORT))
}
