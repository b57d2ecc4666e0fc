//! Structure-aware inputs shared by the fuzz targets: record batches as a producer writes them,
//! then forged the way an attacker would (counts, lengths, corrupt compressed bytes), with the
//! CRC fixed up so the forgery reaches the checks behind it.

use std::alloc::{GlobalAlloc, Layout, System};

use arbitrary::Arbitrary;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krust_storage::batch::{compute_crc, RECORD_BATCH_OVERHEAD};

/// The largest single allocation any input may cause. Decoding a frame of
/// `socket.request.max.bytes` (100 MiB) into structs takes a few times its size (a 36-byte
/// Fetch partition is a ~120-byte struct, and a Vec grows by doubling); a reservation sized
/// from a forged count (up to 2^31 elements) is far beyond.
const MAX_ALLOCATION: usize = 1 << 30;

/// Aborts (a crash libFuzzer records) on an allocation above `MAX_ALLOCATION`, so forged
/// reservations are caught without relying on a sanitizer's allocator.
struct BoundedAllocator;

// SAFETY: forwards every call to the system allocator unchanged after the size check.
unsafe impl GlobalAlloc for BoundedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            std::process::abort();
        }
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOCATION {
            std::process::abort();
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: BoundedAllocator = BoundedAllocator;

/// One record of a batch.
#[derive(Arbitrary, Debug)]
pub struct FuzzRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp_delta: i16,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// What an attacker changes after the producer's encoder is done.
#[derive(Arbitrary, Debug)]
pub enum Forgery {
    None,
    /// Another record count (lastOffsetDelta follows it, as a careful forger does).
    Count(i32),
    /// One byte of the records area: corrupt compressed data, or a length inside a record.
    Byte {
        at: u16,
        value: u8,
    },
    /// A shorter records area (batch length fixed).
    Truncate(u16),
    /// A records area of the attacker's choosing.
    Area(Vec<u8>),
    /// Any header byte, CRC not fixed.
    Header {
        at: u8,
        value: u8,
    },
}

/// A record batch as a producer would send it, then forged.
#[derive(Arbitrary, Debug)]
pub struct FuzzBatch {
    codec: Codec,
    /// Milliseconds from "now" to the base timestamp.
    timestamp_offset: i32,
    records: Vec<FuzzRecord>,
    /// producer id, epoch, base sequence.
    producer: Option<(i64, i16, i32)>,
    forgeries: Vec<Forgery>,
}

impl FuzzBatch {
    /// The batch's bytes (possibly none: an encoder given no record writes nothing).
    pub fn encode(&self, now_ms: i64) -> Vec<u8> {
        let (producer_id, producer_epoch, base_sequence) = self.producer.unwrap_or((-1, -1, -1));
        let base_timestamp = now_ms.saturating_add(i64::from(self.timestamp_offset));
        let records: Vec<Record> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // offset - sequence constant keeps one batch.
                sequence: base_sequence.wrapping_add(i as i32),
                timestamp: base_timestamp.saturating_add(i64::from(r.timestamp_delta)),
                key: r.key.clone().map(Bytes::from),
                value: r.value.clone().map(Bytes::from),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                    .collect(),
            })
            .collect();
        let compression = match self.codec {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        };
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        if RecordBatchEncoder::encode(&mut buf, &records, &options).is_err() {
            return Vec::new();
        }
        let mut bytes = buf.to_vec();
        for forgery in &self.forgeries {
            forge(&mut bytes, forgery);
        }
        bytes
    }
}

fn forge(bytes: &mut Vec<u8>, forgery: &Forgery) {
    if bytes.len() < RECORD_BATCH_OVERHEAD {
        return;
    }
    let area = bytes.len() - RECORD_BATCH_OVERHEAD;
    match forgery {
        Forgery::None => return,
        Forgery::Count(count) => {
            bytes[57..61].copy_from_slice(&count.to_be_bytes());
            bytes[23..27].copy_from_slice(&count.wrapping_sub(1).to_be_bytes());
        }
        Forgery::Byte { at, value } if area > 0 => {
            bytes[RECORD_BATCH_OVERHEAD + usize::from(*at) % area] = *value;
        }
        Forgery::Byte { .. } => return,
        Forgery::Truncate(keep) => {
            bytes.truncate(RECORD_BATCH_OVERHEAD + usize::from(*keep) % (area + 1))
        }
        Forgery::Area(area) => {
            bytes.truncate(RECORD_BATCH_OVERHEAD);
            bytes.extend_from_slice(area);
        }
        Forgery::Header { at, value } => {
            bytes[usize::from(*at) % RECORD_BATCH_OVERHEAD] = *value;
            return;
        }
    }
    let length = (bytes.len() - 12) as i32;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = compute_crc(bytes);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}
