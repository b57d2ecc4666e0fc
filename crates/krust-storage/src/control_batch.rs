//! Transaction markers (KIP-98): the control batch a coordinator writes to end a producer's
//! transaction on a partition, and the transactional batches a coordinator writes itself.
//!
//! A marker is a v2 batch with the transactional and control attributes and one record whose
//! key is Kafka's `ControlRecordType` (version i16 0, type i16: 0 ABORT, 1 COMMIT) and whose
//! value is Kafka's `EndTransactionMarker` (version i16 0, coordinator epoch i32).

use crate::batch::{compute_crc, BatchHeader, LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD};
use crate::batch_builder::records_area;
use crate::error::BatchError;
use crate::records::{put_varlong, record_views};

const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;
/// `ControlRecordType.ABORT` and `COMMIT`, a marker's type.
pub const ABORT: i16 = 0;
pub const COMMIT: i16 = 1;
const MARKER_VERSION: i16 = 0;
/// A marker's records area is a few bytes; more is not a marker.
const MAX_MARKER_AREA: usize = 1 << 16;

/// A record's key and value, either null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The end of a producer's transaction on one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it.
    pub coordinator_epoch: i32,
}

/// A control record's type from its key (`ControlRecordType`: version i16, type i16); `None`
/// for a key too short to hold one.
pub fn control_record_type(key: &[u8]) -> Option<i16> {
    match key {
        [_, _, high, low, ..] => Some(i16::from_be_bytes([*high, *low])),
        _ => None,
    }
}

/// The marker a control batch with a producer id holds; `Ok(None)` for an empty batch (one the
/// cleaner emptied). A control record that is not a well-formed ABORT/COMMIT marker is an
/// invalid record, as Kafka's `EndTransactionMarker.deserialize` refuses it.
pub fn read_end_txn_marker(
    batch: &[u8],
    header: &BatchHeader,
) -> Result<Option<EndTxnMarker>, BatchError> {
    let area = records_area(batch, header, MAX_MARKER_AREA)?;
    let Some(record) = record_views(&area).next() else {
        return Ok(None);
    };
    let record = record?;
    let key = record.key.unwrap_or_default();
    let value = record.value.unwrap_or_default();
    if key.len() < 4 || value.len() < 6 {
        return Err(invalid(
            "a transaction marker needs a 4-byte key and a 6-byte value",
        ));
    }
    let key_version = i16::from_be_bytes([key[0], key[1]]);
    let kind = control_record_type(key).unwrap_or_default();
    let value_version = i16::from_be_bytes([value[0], value[1]]);
    if key_version < 0 || value_version < 0 {
        return Err(invalid("a transaction marker has a negative version"));
    }
    let commit = match kind {
        ABORT => false,
        COMMIT => true,
        other => {
            return Err(invalid(&format!(
                "control record type {other} is not a transaction marker"
            )))
        }
    };
    Ok(Some(EndTxnMarker {
        commit,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    }))
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidRecord(reason.to_string())
}

/// A COMMIT (`commit`) or ABORT marker for `producer_id` at `producer_epoch`, written by the
/// coordinator at `coordinator_epoch`: a v2 control batch with base offset 0, for
/// `ReplicaManager::append_internal` (WriteTxnMarkers).
pub fn end_txn_marker(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = MARKER_VERSION.to_be_bytes().to_vec();
    key.extend_from_slice(&(if commit { COMMIT } else { ABORT }).to_be_bytes());
    let mut value = MARKER_VERSION.to_be_bytes().to_vec();
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    encode_batch(
        &BatchFields {
            attributes: TRANSACTIONAL_FLAG | CONTROL_FLAG,
            producer_id,
            producer_epoch,
            timestamp_ms,
        },
        &[(Some(&key), Some(&value))],
    )
}

/// A transactional batch of `records` (key, value) for `producer_id` at `producer_epoch` with
/// no sequence numbers, as Kafka's coordinators write (TxnOffsetCommit's offsets in
/// `__consumer_offsets`); appended with `AppendOrigin::Coordinator`, it starts or continues the
/// producer's transaction on that partition. Base offset 0, uncompressed.
pub fn transactional_coordinator_batch(
    producer_id: i64,
    producer_epoch: i16,
    records: &[KeyValue<'_>],
    timestamp_ms: i64,
) -> Vec<u8> {
    encode_batch(
        &BatchFields {
            attributes: TRANSACTIONAL_FLAG,
            producer_id,
            producer_epoch,
            timestamp_ms,
        },
        records,
    )
}

struct BatchFields {
    attributes: i16,
    producer_id: i64,
    producer_epoch: i16,
    timestamp_ms: i64,
}

fn encode_batch(fields: &BatchFields, records: &[KeyValue<'_>]) -> Vec<u8> {
    let mut area = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut body = vec![0u8];
        put_varlong(&mut body, 0);
        put_varlong(&mut body, i as i64);
        for field in [key, value] {
            match field {
                Some(bytes) => {
                    put_varlong(&mut body, bytes.len() as i64);
                    body.extend_from_slice(bytes);
                }
                None => put_varlong(&mut body, -1),
            }
        }
        put_varlong(&mut body, 0);
        put_varlong(&mut area, body.len() as i64);
        area.extend_from_slice(&body);
    }
    let count = records.len() as i32;
    let mut batch = Vec::with_capacity(RECORD_BATCH_OVERHEAD + area.len());
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(
        &((RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + area.len()) as i32).to_be_bytes(),
    );
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.push(MAGIC_V2 as u8);
    batch.extend_from_slice(&0u32.to_be_bytes());
    batch.extend_from_slice(&fields.attributes.to_be_bytes());
    batch.extend_from_slice(&(count - 1).to_be_bytes());
    batch.extend_from_slice(&fields.timestamp_ms.to_be_bytes());
    batch.extend_from_slice(&fields.timestamp_ms.to_be_bytes());
    batch.extend_from_slice(&fields.producer_id.to_be_bytes());
    batch.extend_from_slice(&fields.producer_epoch.to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.extend_from_slice(&count.to_be_bytes());
    batch.extend_from_slice(&area);
    let crc = compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::check_integrity;

    #[test]
    fn a_marker_round_trips_with_kafkas_layout() {
        let batch = end_txn_marker(7, 3, 11, false, 1_000);
        let header = check_integrity(&batch).unwrap();
        assert!(header.is_control() && header.is_transactional());
        assert_eq!((header.producer_id, header.producer_epoch), (7, 3));
        assert_eq!((header.base_sequence, header.records_count), (-1, 1));
        let marker = read_end_txn_marker(&batch, &header).unwrap().unwrap();
        assert_eq!(
            marker,
            EndTxnMarker {
                commit: false,
                coordinator_epoch: 11
            }
        );
        let commit = end_txn_marker(7, 3, 11, true, 1_000);
        let header = check_integrity(&commit).unwrap();
        assert!(
            read_end_txn_marker(&commit, &header)
                .unwrap()
                .unwrap()
                .commit
        );
    }

    #[test]
    fn a_garbled_control_record_is_an_invalid_record_not_a_crash() {
        let fields = BatchFields {
            attributes: TRANSACTIONAL_FLAG | CONTROL_FLAG,
            producer_id: 1,
            producer_epoch: 0,
            timestamp_ms: 0,
        };
        let short: &[u8] = &[0, 0];
        let leader_change: &[u8] = &[0, 0, 0, 2];
        let value: &[u8] = &[0, 0, 0, 0, 0, 1];
        for (key, value) in [
            (None, None),
            (Some(short), Some(value)),
            (Some(leader_change), Some(value)),
            (Some(&[0u8, 0, 0, 1][..]), Some(short)),
        ] {
            let batch = encode_batch(&fields, &[(key, value)]);
            let header = check_integrity(&batch).unwrap();
            let error = read_end_txn_marker(&batch, &header).unwrap_err();
            assert!(matches!(error, BatchError::InvalidRecord(_)), "{error}");
        }
    }

    #[test]
    fn a_coordinator_batch_is_transactional_without_sequence() {
        let batch = transactional_coordinator_batch(5, 2, &[(Some(b"k"), Some(b"v"))], 9);
        let header = check_integrity(&batch).unwrap();
        assert!(header.is_transactional() && !header.is_control());
        assert_eq!((header.producer_id, header.base_sequence), (5, -1));
    }
}
