//! Writing a v2 record batch: a header taken from an existing batch, a new records area,
//! compressed with a topic's codec and level, with its length and CRC32C recomputed.
//!
//! Used where Kafka builds batches with `MemoryRecordsBuilder`: the log cleaner's rewritten
//! batches and broker-side recompression (`compression.type`).

use std::io::{self, Read, Write};

use crate::batch::{
    compute_crc, BatchHeader, Compression, LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD,
};
use crate::compression::decompressing_reader;
use crate::config::{CompressionType, LogConfig};
use crate::error::BatchError;

/// snappy-java's stream header (magic, version 1, compatible version 1), as Kafka writes it.
const SNAPPY_JAVA_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
/// snappy-java's block size.
const SNAPPY_BLOCK: usize = 32 * 1024;
/// Kafka's gzip default level (`Deflater.DEFAULT_COMPRESSION`).
const GZIP_DEFAULT_LEVEL: u32 = 6;

const COMPRESSION_MASK: i16 = 0x07;

/// The most one batch may expand to when the broker decompresses it to rewrite it: what Kafka
/// would hold in memory too, bounded so a small batch cannot claim gigabytes.
pub const MAX_DECOMPRESSED_BYTES: usize = 128 << 20;

/// A codec with the level a topic configures for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codec {
    pub compression: Compression,
    level: i32,
}

impl Codec {
    /// No compression.
    pub const NONE: Self = Self {
        compression: Compression::None,
        level: 0,
    };

    /// `compression` at the level `config` sets for it (`compression.<codec>.level`).
    pub fn with_topic_level(compression: Compression, config: &LogConfig) -> Self {
        let level = match compression {
            Compression::Gzip => config.compression_gzip_level,
            Compression::Lz4 => config.compression_lz4_level,
            Compression::Zstd => config.compression_zstd_level,
            Compression::None | Compression::Snappy => 0,
        };
        Self { compression, level }
    }

    /// The codec `compression.type` asks for, or `None` for `producer` (keep the batch's own).
    pub fn for_topic(config: &LogConfig) -> Option<Self> {
        let compression = match config.compression_type {
            CompressionType::Producer => return None,
            CompressionType::Uncompressed => Compression::None,
            CompressionType::Gzip => Compression::Gzip,
            CompressionType::Snappy => Compression::Snappy,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        };
        Some(Self::with_topic_level(compression, config))
    }

    fn compress(&self, area: &[u8]) -> io::Result<Vec<u8>> {
        match self.compression {
            Compression::None => Ok(area.to_vec()),
            Compression::Gzip => {
                let level = u32::try_from(self.level).unwrap_or(GZIP_DEFAULT_LEVEL);
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
                encoder.write_all(area)?;
                encoder.finish()
            }
            Compression::Snappy => {
                let mut out = SNAPPY_JAVA_HEADER.to_vec();
                let mut encoder = snap::raw::Encoder::new();
                for chunk in area.chunks(SNAPPY_BLOCK) {
                    let block = encoder.compress_vec(chunk).map_err(io::Error::other)?;
                    out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                    out.extend_from_slice(&block);
                }
                Ok(out)
            }
            Compression::Lz4 => {
                // Kafka's KafkaLZ4BlockOutputStream: independent 64 KiB blocks, no checksums.
                let mut encoder = lz4::EncoderBuilder::new()
                    .level(u32::try_from(self.level).unwrap_or(0))
                    .block_size(lz4::BlockSize::Max64KB)
                    .block_mode(lz4::BlockMode::Independent)
                    .checksum(lz4::ContentChecksum::NoChecksum)
                    .build(Vec::new())?;
                encoder.write_all(area)?;
                let (out, result) = encoder.finish();
                result.map(|()| out)
            }
            Compression::Zstd => zstd::encode_all(area, self.level),
        }
    }
}

/// A batch with `header`'s fields (base offset, epochs, producer fields, timestamps, counts)
/// over `records_area` (uncompressed records), compressed with `codec`.
pub fn build_batch(header: &BatchHeader, records_area: &[u8], codec: Codec) -> io::Result<Vec<u8>> {
    let payload = codec.compress(records_area)?;
    let attributes = (header.attributes & !COMPRESSION_MASK) | compression_id(codec.compression);
    let length = i32::try_from(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + payload.len())
        .map_err(|_| io::Error::other("a rebuilt batch exceeds 2 GiB"))?;
    let mut batch = Vec::with_capacity(RECORD_BATCH_OVERHEAD + payload.len());
    batch.extend_from_slice(&header.base_offset.to_be_bytes());
    batch.extend_from_slice(&length.to_be_bytes());
    batch.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
    batch.push(MAGIC_V2 as u8);
    batch.extend_from_slice(&0u32.to_be_bytes());
    batch.extend_from_slice(&attributes.to_be_bytes());
    batch.extend_from_slice(&header.last_offset_delta.to_be_bytes());
    batch.extend_from_slice(&header.base_timestamp.to_be_bytes());
    batch.extend_from_slice(&header.max_timestamp.to_be_bytes());
    batch.extend_from_slice(&header.producer_id.to_be_bytes());
    batch.extend_from_slice(&header.producer_epoch.to_be_bytes());
    batch.extend_from_slice(&header.base_sequence.to_be_bytes());
    batch.extend_from_slice(&header.records_count.to_be_bytes());
    batch.extend_from_slice(&payload);
    let crc = compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(batch)
}

/// The uncompressed records area of `batch` (one whole, already validated batch), read with
/// at most `limit` bytes: a batch that expands further is refused, never held.
pub fn records_area(
    batch: &[u8],
    header: &BatchHeader,
    limit: usize,
) -> Result<Vec<u8>, BatchError> {
    let payload = batch.get(RECORD_BATCH_OVERHEAD..).unwrap_or_default();
    let compression = header.compression();
    let mut area = Vec::new();
    decompressing_reader(compression, payload)?
        .take(limit as u64 + 1)
        .read_to_end(&mut area)
        .map_err(|e| crate::compression::corrupt(compression, &e))?;
    if area.len() > limit {
        return Err(BatchError::InvalidRecord(format!(
            "the records decompress to more than {limit} bytes"
        )));
    }
    Ok(area)
}

fn compression_id(compression: Compression) -> i16 {
    match compression {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check_integrity, test_batches::TestBatch};
    use crate::records::batch_records;

    #[test]
    fn every_codec_round_trips_through_the_broker_own_reader() {
        let config = LogConfig::default();
        for from in Compression::ALL {
            let original = TestBatch::simple(300, 1_000).compressed(from).encode();
            let header = check_integrity(&original).unwrap();
            let area = records_area(&original, &header, 1 << 20).unwrap();
            for to in Compression::ALL {
                let rebuilt =
                    build_batch(&header, &area, Codec::with_topic_level(to, &config)).unwrap();
                let rebuilt_header = check_integrity(&rebuilt).unwrap();
                assert_eq!(rebuilt_header.compression(), to, "{from:?} -> {to:?}");
                assert_eq!(rebuilt_header.records_count, 300);
                assert_eq!(
                    records_area(&rebuilt, &rebuilt_header, 1 << 20).unwrap(),
                    area
                );
                let walked = batch_records(&rebuilt, &rebuilt_header).unwrap().count();
                assert_eq!(walked, 300, "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn levels_change_the_output_and_an_oversized_expansion_is_refused() {
        let original = TestBatch::simple(500, 1_000).encode();
        let header = check_integrity(&original).unwrap();
        let area = records_area(&original, &header, 1 << 20).unwrap();
        let levels = [
            (Compression::Gzip, "compression.gzip.level", "1", "9"),
            (Compression::Lz4, "compression.lz4.level", "1", "17"),
            (Compression::Zstd, "compression.zstd.level", "1", "19"),
        ];
        for (compression, key, low, high) in levels {
            let built = |level: &str| {
                let mut config = LogConfig::default();
                config.apply_override(key, level).unwrap();
                let codec = Codec::with_topic_level(compression, &config);
                build_batch(&header, &area, codec).unwrap()
            };
            assert_ne!(built(low), built(high), "{key}");
        }
        let gzip = TestBatch::simple(500, 1_000)
            .compressed(Compression::Gzip)
            .encode();
        let gzip_header = check_integrity(&gzip).unwrap();
        assert!(records_area(&gzip, &gzip_header, area.len() - 1).is_err());
    }
}
