//! Broker-side recompression: a topic whose `compression.type` names a codec stores every
//! batch with it, as Kafka's `LogValidator` does on its compressed path
//! (`validateMessagesAndAssignOffsetsCompressed`). With `producer`, or a batch already in the
//! topic's codec, the produced bytes are stored as they came.

use crate::batch::{self, BatchHeader};
use crate::batch_builder::{build_batch, records_area, Codec, MAX_DECOMPRESSED_BYTES};
use crate::config::LogConfig;
use crate::error::AppendError;
use crate::validate::ValidatedBatch;

/// The record set to store: `records` itself, or with each batch whose codec differs from
/// the topic's rebuilt in the topic's codec (and the batches' ranges and headers updated).
pub(crate) fn to_topic_codec(
    records: &[u8],
    mut batches: Vec<ValidatedBatch>,
    config: &LogConfig,
) -> Result<(Vec<u8>, Vec<ValidatedBatch>), AppendError> {
    let Some(codec) = Codec::for_topic(config) else {
        return Ok((records.to_vec(), batches));
    };
    let needs_rebuild =
        |header: &BatchHeader| !header.is_control() && header.compression() != codec.compression;
    if !batches.iter().any(|b| needs_rebuild(&b.header)) {
        return Ok((records.to_vec(), batches));
    }
    let mut out = Vec::with_capacity(records.len());
    for validated in &mut batches {
        let bytes = &records[validated.range.clone()];
        let start = out.len();
        if needs_rebuild(&validated.header) {
            let area = records_area(bytes, &validated.header, MAX_DECOMPRESSED_BYTES)?;
            let rebuilt = build_batch(&validated.header, &area, codec)?;
            if rebuilt.len() > config.max_message_bytes() {
                return Err(AppendError::MessageTooLarge {
                    size: rebuilt.len(),
                    max: config.max_message_bytes(),
                });
            }
            out.extend_from_slice(&rebuilt);
            validated.header = batch::check_integrity(&rebuilt)?;
        } else {
            out.extend_from_slice(bytes);
        }
        validated.range = start..out.len();
    }
    Ok((out, batches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::batch::Compression;
    use crate::log_tests::{open_log, NOW};

    const CODECS: [(&str, Compression); 5] = [
        ("uncompressed", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];

    fn stored_batches(log: &crate::Log) -> Vec<Vec<u8>> {
        let plan = log.read_plan(0, log.log_end_offset()).unwrap();
        let data = plan
            .read(usize::MAX, true)
            .unwrap()
            .records
            .read_bytes()
            .unwrap();
        batch::split_batches(&data)
            .unwrap()
            .into_iter()
            .map(|r| data[r].to_vec())
            .collect()
    }

    #[test]
    fn a_topic_codec_recompresses_every_other_codec_and_keeps_the_records() {
        for (name, topic_codec) in CODECS {
            let dir = tempfile::tempdir().unwrap();
            let mut config = LogConfig::default();
            config.apply_override("compression.type", name).unwrap();
            let mut log = open_log(dir.path(), config);
            for (_, produced) in CODECS {
                let batch = TestBatch::simple(20, NOW).compressed(produced).encode();
                log.append_as_leader(&batch, 0, NOW).unwrap();
            }
            let stored = stored_batches(&log);
            assert_eq!(stored.len(), CODECS.len());
            let plain = TestBatch::simple(20, NOW).encode();
            let plain_header = batch::check_integrity(&plain).unwrap();
            let expected_area = records_area(&plain, &plain_header, 1 << 20).unwrap();
            for (i, bytes) in stored.iter().enumerate() {
                let header = batch::check_integrity(bytes).unwrap();
                assert_eq!(header.compression(), topic_codec, "{name}, batch {i}");
                assert_eq!(header.base_offset, 20 * i as i64);
                let area = records_area(bytes, &header, 1 << 20).unwrap();
                assert_eq!(area, expected_area, "{name}, batch {i}");
            }
        }
    }

    #[test]
    fn producer_keeps_the_produced_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), LogConfig::default());
        let batch = TestBatch::simple(5, NOW)
            .compressed(Compression::Lz4)
            .encode();
        log.append_as_leader(&batch, 0, NOW).unwrap();
        let stored = stored_batches(&log);
        assert_eq!(stored[0][21..], batch[21..]);
    }
}
