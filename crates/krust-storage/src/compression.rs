//! Streaming decompression of a batch's records area, with memory bounded by fixed caps.
//!
//! Kafka's codecs: gzip (`GZIPInputStream`, concatenated members allowed), snappy in
//! snappy-java's stream framing or as one raw block (what `SnappyInputStream` accepts), the LZ4
//! frame format (KIP-57 fixed Kafka's header checksum for v1+ batches) and zstd frames. Every
//! decoder streams: the decompressed bytes are never held whole, except one snappy block,
//! whose size is checked against what its compressed bytes can expand to and a fixed cap.

use std::io::{self, Read};

use crate::codec::Compression;
use crate::error::BatchError;

/// snappy-java's stream header: magic, then version and compatible version (both 1).
const SNAPPY_JAVA_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const SNAPPY_JAVA_HEADER: usize = SNAPPY_JAVA_MAGIC.len() + 8;
/// The largest expansion snappy's format allows: a 3-byte copy element yields at most 64 bytes.
const SNAPPY_MAX_EXPANSION: usize = 22;
/// No single snappy block may claim more than this (snappy-java writes 32 KiB blocks; raw
/// blocks from other clients hold a whole batch).
const SNAPPY_MAX_BLOCK: usize = 64 << 20;

/// A reader of the decompressed records area of a batch compressed with `compression`.
pub(crate) fn decompressing_reader<'a>(
    compression: Compression,
    payload: &'a [u8],
) -> Result<Box<dyn Read + 'a>, BatchError> {
    let corrupt = |e: io::Error| corrupt(compression, &e);
    Ok(match compression {
        Compression::None => Box::new(payload),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(payload)),
        Compression::Snappy => Box::new(SnappyReader::new(payload)),
        Compression::Lz4 => Box::new(lz4::Decoder::new(payload).map_err(corrupt)?),
        // zstd's default window limit (2^27 bytes, as Kafka's zstd-jni) caps its buffers.
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(payload).map_err(corrupt)?)
        }
    })
}

pub(crate) fn corrupt(compression: Compression, error: &io::Error) -> BatchError {
    BatchError::Undecompressable {
        compression,
        reason: error.to_string(),
    }
}

/// snappy-java's `SnappyInputStream`: a framed stream of length-prefixed raw blocks, or, when
/// the magic is absent, the whole payload as one raw block.
struct SnappyReader<'a> {
    /// Compressed input not yet decompressed.
    input: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    position: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(payload: &'a [u8]) -> Self {
        let framed = payload.len() >= SNAPPY_JAVA_HEADER && payload.starts_with(&SNAPPY_JAVA_MAGIC);
        Self {
            input: if framed {
                &payload[SNAPPY_JAVA_HEADER..]
            } else {
                payload
            },
            framed,
            block: Vec::new(),
            position: 0,
        }
    }

    /// The next compressed block, or `None` at the end of the input.
    fn next_compressed_block(&mut self) -> io::Result<Option<&'a [u8]>> {
        if self.input.is_empty() {
            return Ok(None);
        }
        if !self.framed {
            return Ok(Some(std::mem::take(&mut self.input)));
        }
        let Some((length, rest)) = self.input.split_first_chunk::<4>() else {
            return Err(invalid_data("truncated snappy block length"));
        };
        let length = usize::try_from(i32::from_be_bytes(*length))
            .ok()
            .filter(|length| *length <= rest.len())
            .ok_or_else(|| invalid_data("snappy block length runs past the batch"))?;
        let (block, rest) = rest.split_at(length);
        self.input = rest;
        Ok(Some(block))
    }

    fn fill(&mut self) -> io::Result<bool> {
        let Some(compressed) = self.next_compressed_block()? else {
            return Ok(false);
        };
        let length = snap::raw::decompress_len(compressed).map_err(io::Error::other)?;
        if length > SNAPPY_MAX_BLOCK || length > compressed.len() * SNAPPY_MAX_EXPANSION {
            return Err(invalid_data("snappy block claims more than it can hold"));
        }
        self.block.clear();
        self.block.resize(length, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(io::Error::other)?;
        self.position = 0;
        Ok(true)
    }
}

fn invalid_data(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.position == self.block.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.block.len() - self.position);
        out[..n].copy_from_slice(&self.block[self.position..self.position + n]);
        self.position += n;
        Ok(n)
    }
}

/// Why [`decompress_payload`] gave no bytes.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Not one of Kafka's compression type ids (`CompressionType.forId`).
    #[error("unknown compression type id {0}")]
    UnknownCodec(i8),
    /// The payload does not decompress with the codec it names.
    #[error("payload does not decompress as {compression:?}: {reason}")]
    Corrupt {
        compression: Compression,
        reason: String,
    },
    /// The decompressed payload is longer than the bound it was given.
    #[error("payload decompresses to more than {limit} bytes")]
    TooLarge { limit: usize },
}

/// Decompresses a whole payload compressed with Kafka's codec `codec_id` (0 none, 1 gzip,
/// 2 snappy, 3 lz4, 4 zstd), reading at most `limit` bytes of output: what a broker does with
/// a KIP-714 PushTelemetry payload (`ClientTelemetryUtils.decompress`), with the memory bound
/// `telemetry.max.bytes` gives.
pub fn decompress_payload(
    codec_id: i8,
    payload: &[u8],
    limit: usize,
) -> Result<Vec<u8>, PayloadError> {
    let compression = match codec_id {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => return Err(PayloadError::UnknownCodec(other)),
    };
    let to_error = |error: &io::Error| PayloadError::Corrupt {
        compression,
        reason: error.to_string(),
    };
    let reader = decompressing_reader(compression, payload).map_err(|error| match error {
        BatchError::Undecompressable { reason, .. } => PayloadError::Corrupt {
            compression,
            reason,
        },
        other => PayloadError::Corrupt {
            compression,
            reason: other.to_string(),
        },
    })?;
    let mut out = Vec::new();
    // One byte past the bound tells a payload at the bound from one beyond it.
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|error| to_error(&error))?;
    if out.len() > limit {
        return Err(PayloadError::TooLarge { limit });
    }
    Ok(out)
}

#[cfg(test)]
mod payload_tests {
    use std::io::Write;

    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_payload_decompresses_within_its_bound() {
        let data = b"metrics".repeat(100);
        assert_eq!(
            decompress_payload(1, &gzip(&data), data.len()).unwrap(),
            data
        );
        assert_eq!(decompress_payload(0, &data, data.len()).unwrap(), data);
    }

    #[test]
    fn a_payload_past_its_bound_is_too_large() {
        let data = vec![0u8; 10_000];
        assert!(matches!(
            decompress_payload(1, &gzip(&data), 9_999),
            Err(PayloadError::TooLarge { limit: 9_999 })
        ));
    }

    #[test]
    fn unknown_codecs_and_garbage_are_refused() {
        assert!(matches!(
            decompress_payload(5, b"x", 10),
            Err(PayloadError::UnknownCodec(5))
        ));
        assert!(matches!(
            decompress_payload(4, b"not zstd", 10),
            Err(PayloadError::Corrupt { .. })
        ));
    }
}
