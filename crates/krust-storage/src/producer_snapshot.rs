//! The `<20-digit offset>.snapshot` file: Kafka's ProducerSnapshot schema, version 1.
//!
//! Layout (big-endian): version i16 | crc u32 | entry count i32 | entries, each
//! producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 | offsetDelta i32 |
//! timestamp i64 | coordinatorEpoch i32 | currentTxnFirstOffset i64.
//! The CRC32C covers everything after the crc field.

pub const SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";

const VERSION: i16 = 1;
const CRC_OFFSET: usize = 2;
const ENTRIES_OFFSET: usize = 6;
const ENTRY_SIZE: usize = 46;

/// One producer's row in a snapshot: its epoch and its last written batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: i64,
}

pub fn encode(entries: &[SnapshotEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENTRIES_OFFSET + 4 + entries.len() * ENTRY_SIZE);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.last_sequence.to_be_bytes());
        out.extend_from_slice(&e.last_offset.to_be_bytes());
        out.extend_from_slice(&e.offset_delta.to_be_bytes());
        out.extend_from_slice(&e.timestamp.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[ENTRIES_OFFSET..]);
    out[CRC_OFFSET..ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Parses a snapshot, rejecting unknown versions, bad CRCs and wrong lengths.
pub fn decode(bytes: &[u8]) -> Result<Vec<SnapshotEntry>, String> {
    if bytes.len() < ENTRIES_OFFSET + 4 {
        return Err("snapshot is too short".to_string());
    }
    let mut r = Reader { bytes, at: 0 };
    let version = r.i16();
    if version != VERSION {
        return Err(format!("unsupported snapshot version {version}"));
    }
    let stored = r.i32() as u32;
    let computed = crc32c::crc32c(&bytes[ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(format!(
            "snapshot CRC mismatch: stored {stored:#x}, computed {computed:#x}"
        ));
    }
    let count = usize::try_from(r.i32()).map_err(|_| "negative entry count".to_string())?;
    if bytes.len() != ENTRIES_OFFSET + 4 + count * ENTRY_SIZE {
        return Err("snapshot length does not match its entry count".to_string());
    }
    Ok((0..count)
        .map(|_| SnapshotEntry {
            producer_id: r.i64(),
            epoch: r.i16(),
            last_sequence: r.i32(),
            last_offset: r.i64(),
            offset_delta: r.i32(),
            timestamp: r.i64(),
            coordinator_epoch: r.i32(),
            current_txn_first_offset: r.i64(),
        })
        .collect())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut raw = [0u8; N];
        raw.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        raw
    }

    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }

    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }

    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64) -> SnapshotEntry {
        SnapshotEntry {
            producer_id: pid,
            epoch: 3,
            last_sequence: 41,
            last_offset: 1000,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    #[test]
    fn round_trips_and_has_kafkas_size() {
        let entries = vec![entry(1), entry(2)];
        let bytes = encode(&entries);
        assert_eq!(bytes.len(), 2 + 4 + 4 + 2 * 46);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(decode(&bytes).unwrap(), entries);
    }

    #[test]
    fn rejects_corruption() {
        let mut bytes = encode(&[entry(1)]);
        bytes[20] ^= 0x40;
        assert!(decode(&bytes).is_err());
        assert!(decode(&bytes[..10]).is_err());
        assert!(decode(&[]).is_err());
    }
}
