//! RecordBatch v2 header view: parse, check and patch a batch without decoding its records.
//!
//! Layout (big-endian): baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 |
//! crc u32 | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records.
//! The CRC32C covers everything from `attributes` to the end, so the base offset and the
//! partition leader epoch can be patched without recomputing it.

use std::ops::Range;

pub use crate::codec::Compression;
use crate::config::TimestampType;
use crate::error::BatchError;

/// `baseOffset` + `batchLength`: the bytes before the length-counted part of a batch.
pub const LOG_OVERHEAD: usize = 12;
/// The size of a v2 batch header; records start here.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// The only message format this broker stores.
pub const MAGIC_V2: i8 = 2;
/// `RecordBatch.NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;

const BASE_OFFSET: usize = 0;
const BATCH_LENGTH: usize = 8;
const PARTITION_LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORDS_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_FLAG: i16 = 0x08;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;

/// The decoded fixed-size header of a v2 record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(raw)
}

impl BatchHeader {
    /// Parses the header from the first 61 bytes; `None` if fewer are given.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < RECORD_BATCH_OVERHEAD {
            return None;
        }
        Some(Self {
            base_offset: i64_at(bytes, BASE_OFFSET),
            batch_length: i32_at(bytes, BATCH_LENGTH),
            partition_leader_epoch: i32_at(bytes, PARTITION_LEADER_EPOCH),
            magic: bytes[MAGIC] as i8,
            crc: i32_at(bytes, CRC) as u32,
            attributes: i16_at(bytes, ATTRIBUTES),
            last_offset_delta: i32_at(bytes, LAST_OFFSET_DELTA),
            base_timestamp: i64_at(bytes, BASE_TIMESTAMP),
            max_timestamp: i64_at(bytes, MAX_TIMESTAMP),
            producer_id: i64_at(bytes, PRODUCER_ID),
            producer_epoch: i16_at(bytes, PRODUCER_EPOCH),
            base_sequence: i32_at(bytes, BASE_SEQUENCE),
            records_count: i32_at(bytes, RECORDS_COUNT),
        })
    }

    /// Total size on disk / on the wire, including the 12-byte log overhead.
    pub fn size_in_bytes(&self) -> usize {
        LOG_OVERHEAD + usize::try_from(self.batch_length).unwrap_or(0)
    }

    /// The offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    pub fn compression(&self) -> Compression {
        compression_of(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_FLAG != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }

    /// Idempotent / transactional batches carry a producer id >= 0.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// The sequence of the last record; sequences wrap from i32::MAX to 0 like Kafka's.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

fn compression_of(attributes: i16) -> Compression {
    match attributes & COMPRESSION_MASK {
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        _ => Compression::None,
    }
}

/// Adds `delta` (possibly negative) to a producer sequence number; sequences wrap between
/// i32::MAX and 0 like Kafka's. A negative sequence (no sequence) stays as it is.
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    if sequence < 0 {
        return sequence;
    }
    (i64::from(sequence) + i64::from(delta)).rem_euclid(1 << 31) as i32
}

/// CRC32C of a whole batch as Kafka computes it (attributes to the end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES..])
}

/// Reads the total size of the batch starting at `bytes` from its length field, if present.
pub fn declared_size(bytes: &[u8]) -> Option<Result<usize, BatchError>> {
    if bytes.len() < LOG_OVERHEAD {
        return None;
    }
    let length = i32_at(bytes, BATCH_LENGTH);
    let min_length = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
    if length < min_length {
        return Some(Err(BatchError::IllegalLength(length)));
    }
    Some(Ok(LOG_OVERHEAD + length as usize))
}

/// Checks that `batch` (exactly one batch's bytes) is an intact v2 batch: size, magic, CRC.
pub fn check_integrity(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(batch).ok_or(BatchError::Truncated {
        available: batch.len(),
        needed: RECORD_BATCH_OVERHEAD,
    })?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic(header.magic));
    }
    match declared_size(batch) {
        Some(Ok(size)) if size == batch.len() => {}
        Some(Ok(size)) => {
            return Err(BatchError::Truncated {
                available: batch.len(),
                needed: size,
            })
        }
        Some(Err(e)) => return Err(e),
        None => unreachable!("a parsed header is longer than the log overhead"),
    }
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Splits concatenated batches (a Produce request's record set) into byte ranges.
///
/// Each range is exactly one batch as declared by its length field; a trailing fragment is
/// reported as truncated rather than silently dropped.
pub fn split_batches(records: &[u8]) -> Result<Vec<Range<usize>>, BatchError> {
    let mut ranges = Vec::new();
    let mut position = 0;
    while position < records.len() {
        let rest = &records[position..];
        let size = match declared_size(rest) {
            None => {
                return Err(BatchError::Truncated {
                    available: rest.len(),
                    needed: LOG_OVERHEAD,
                })
            }
            Some(size) => size?,
        };
        if size > rest.len() {
            return Err(BatchError::Truncated {
                available: rest.len(),
                needed: size,
            });
        }
        ranges.push(position..position + size);
        position += size;
    }
    Ok(ranges)
}

/// Writes the broker-assigned base offset (outside the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes the leader epoch under which the batch was appended (outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Sets the timestamp type bit and `maxTimestamp`, then recomputes the CRC (both are covered).
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let attributes = i16_at(batch, ATTRIBUTES);
    let attributes = match timestamp_type {
        TimestampType::LogAppendTime => attributes | TIMESTAMP_TYPE_FLAG,
        TimestampType::CreateTime => attributes & !TIMESTAMP_TYPE_FLAG,
    };
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
pub(crate) mod test_batches {
    //! A hand-assembled v2 batch builder shared by the crate's tests.

    use super::*;
    use crate::records::put_varlong;

    /// One record: key, value and a timestamp delta.
    #[derive(Clone, Debug)]
    pub struct TestRecord {
        pub key: Option<Vec<u8>>,
        pub value: Option<Vec<u8>>,
        pub timestamp_delta: i64,
    }

    /// Parameters of a test batch.
    #[derive(Clone, Debug)]
    pub struct TestBatch {
        pub base_timestamp: i64,
        pub producer_id: i64,
        pub producer_epoch: i16,
        pub base_sequence: i32,
        pub attributes: i16,
        pub records: Vec<TestRecord>,
    }

    impl TestBatch {
        /// A non-idempotent uncompressed batch of `count` records with distinct values.
        pub fn simple(count: usize, base_timestamp: i64) -> Self {
            let records = (0..count)
                .map(|i| TestRecord {
                    key: Some(format!("k{i}").into_bytes()),
                    value: Some(format!("value-{i}-{base_timestamp}").into_bytes()),
                    timestamp_delta: i as i64,
                })
                .collect();
            Self {
                base_timestamp,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                attributes: 0,
                records,
            }
        }

        /// The same records, compressed with `compression` (snappy in snappy-java's framing,
        /// as the Java producer writes it).
        pub fn compressed(mut self, compression: Compression) -> Self {
            let codec = match compression {
                Compression::None => 0,
                Compression::Gzip => 1,
                Compression::Snappy => 2,
                Compression::Lz4 => 3,
                Compression::Zstd => 4,
            };
            self.attributes = (self.attributes & !COMPRESSION_MASK) | codec;
            self
        }

        /// The same records, sent by an idempotent producer.
        pub fn idempotent(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
            self.producer_id = producer_id;
            self.producer_epoch = epoch;
            self.base_sequence = base_sequence;
            self
        }

        /// The same records, sent by a transactional producer.
        pub fn transactional(self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
            let mut batch = self.idempotent(producer_id, epoch, base_sequence);
            batch.attributes |= TRANSACTIONAL_FLAG;
            batch
        }

        pub fn encode(&self) -> Vec<u8> {
            let mut records = Vec::new();
            for (i, r) in self.records.iter().enumerate() {
                let mut body = vec![0u8];
                put_varlong(&mut body, r.timestamp_delta);
                put_varlong(&mut body, i as i64);
                for field in [&r.key, &r.value] {
                    match field {
                        Some(b) => {
                            put_varlong(&mut body, b.len() as i64);
                            body.extend_from_slice(b);
                        }
                        None => put_varlong(&mut body, -1),
                    }
                }
                put_varlong(&mut body, 0);
                put_varlong(&mut records, body.len() as i64);
                records.extend_from_slice(&body);
            }
            let max_ts = self
                .records
                .iter()
                .map(|r| self.base_timestamp + r.timestamp_delta)
                .max()
                .unwrap_or(self.base_timestamp);
            let records = compress(compression_of(self.attributes), &records);
            let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
            b.extend_from_slice(&0i64.to_be_bytes());
            b.extend_from_slice(
                &((RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + records.len()) as i32).to_be_bytes(),
            );
            b.extend_from_slice(&(-1i32).to_be_bytes());
            b.push(MAGIC_V2 as u8);
            b.extend_from_slice(&0u32.to_be_bytes());
            b.extend_from_slice(&self.attributes.to_be_bytes());
            b.extend_from_slice(&(self.records.len() as i32 - 1).to_be_bytes());
            b.extend_from_slice(&self.base_timestamp.to_be_bytes());
            b.extend_from_slice(&max_ts.to_be_bytes());
            b.extend_from_slice(&self.producer_id.to_be_bytes());
            b.extend_from_slice(&self.producer_epoch.to_be_bytes());
            b.extend_from_slice(&self.base_sequence.to_be_bytes());
            b.extend_from_slice(&(self.records.len() as i32).to_be_bytes());
            b.extend_from_slice(&records);
            let crc = compute_crc(&b);
            b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
            b
        }
    }

    /// `area` compressed as a producer would.
    pub fn compress(compression: Compression, area: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match compression {
            Compression::None => area.to_vec(),
            Compression::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(area).unwrap();
                encoder.finish().unwrap()
            }
            Compression::Snappy => {
                let mut out = vec![0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1];
                out.extend_from_slice(&1i32.to_be_bytes());
                // Small blocks, to exercise the framing.
                for chunk in area.chunks(64) {
                    let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
                    out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                    out.extend_from_slice(&block);
                }
                out
            }
            Compression::Lz4 => {
                let mut encoder = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
                encoder.write_all(area).unwrap();
                let (out, result) = encoder.finish();
                result.unwrap();
                out
            }
            Compression::Zstd => zstd::encode_all(area, 3).unwrap(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_batches::TestBatch;
    use super::*;

    #[test]
    fn parses_what_the_builder_wrote() {
        let bytes = TestBatch::simple(3, 1_000).idempotent(7, 2, 10).encode();
        let h = check_integrity(&bytes).unwrap();
        assert_eq!(h.magic, 2);
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.max_timestamp, 1_002);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 2, 10)
        );
        assert_eq!(h.last_sequence(), 12);
        assert_eq!(h.size_in_bytes(), bytes.len());
        assert_eq!(h.compression(), Compression::None);
    }

    #[test]
    fn patching_offset_and_epoch_keeps_crc_valid() {
        let mut bytes = TestBatch::simple(2, 5).encode();
        set_base_offset(&mut bytes, 42);
        set_partition_leader_epoch(&mut bytes, 9);
        let h = check_integrity(&bytes).unwrap();
        assert_eq!(
            (h.base_offset, h.last_offset(), h.partition_leader_epoch),
            (42, 43, 9)
        );
    }

    #[test]
    fn log_append_time_rewrites_crc() {
        let mut bytes = TestBatch::simple(2, 5).encode();
        set_max_timestamp(&mut bytes, TimestampType::LogAppendTime, 777);
        let h = check_integrity(&bytes).unwrap();
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(h.max_timestamp, 777);
    }

    #[test]
    fn detects_bit_flip_bad_magic_and_truncation() {
        let bytes = TestBatch::simple(2, 5).encode();
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            check_integrity(&flipped),
            Err(BatchError::CrcMismatch { .. })
        ));
        let mut v1 = bytes.clone();
        v1[MAGIC] = 1;
        assert_eq!(check_integrity(&v1), Err(BatchError::UnsupportedMagic(1)));
        assert!(matches!(
            check_integrity(&bytes[..bytes.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
    }

    #[test]
    fn splits_concatenated_batches_and_rejects_fragments() {
        let a = TestBatch::simple(1, 1).encode();
        let b = TestBatch::simple(4, 2).encode();
        let mut both = a.clone();
        both.extend_from_slice(&b);
        let ranges = split_batches(&both).unwrap();
        assert_eq!(ranges, vec![0..a.len(), a.len()..a.len() + b.len()]);
        assert!(split_batches(&both[..both.len() - 3]).is_err());
        assert!(split_batches(&both[..a.len() + 5]).is_err());
    }

    #[test]
    fn sequence_wraps_like_kafka() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(1, -3), i32::MAX - 1);
    }
}
