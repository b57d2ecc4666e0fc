//! `LogValidator`: the checks a produced record set passes before the leader assigns offsets.
//!
//! Batches are checked from their headers (magic, size, CRC, counts, producer fields), then
//! their records are walked structurally, never decoded into objects: uncompressed batches in
//! place, compressed ones through a bounded streaming decompressor (as Kafka's LogValidator
//! iterates them). Compressed batches are stored as produced, still compressed.

use std::ops::Range;

use crate::append_origin::AppendOrigin;
use crate::batch::{self, BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::config::{LogConfig, TimestampType};
use crate::error::{AppendError, BatchError, RecordError};
use crate::records::{self, RecordInfo};
use crate::topic_partition::TopicPartition;

/// One batch of a produced record set that passed validation.
#[derive(Clone, Debug)]
pub(crate) struct ValidatedBatch {
    pub range: Range<usize>,
    pub header: BatchHeader,
    /// The max timestamp to store: from the records when they were walked, else the header's.
    pub max_timestamp: i64,
}

/// What the checks need to know about the log appended to.
pub(crate) struct Target<'a> {
    pub topic_partition: &'a TopicPartition,
    pub config: &'a LogConfig,
}

/// Validates a record set a leader is about to append for `origin`.
pub(crate) fn validate_records(
    records: &[u8],
    target: &Target<'_>,
    origin: AppendOrigin,
    now_ms: i64,
) -> Result<Vec<ValidatedBatch>, AppendError> {
    let config = target.config;
    if records.is_empty() {
        return Err(invalid("the record set holds no record batch").into());
    }
    let ranges = batch::split_batches(records)?;
    let segment_bytes = config.segment_bytes() as usize;
    if records.len() > segment_bytes {
        return Err(AppendError::RecordListTooLarge {
            size: records.len(),
            segment_bytes,
        });
    }
    ranges
        .into_iter()
        .map(|range| {
            validate_batch(&records[range.clone()], target, origin, now_ms).map(
                |(header, max_timestamp)| ValidatedBatch {
                    range,
                    header,
                    max_timestamp,
                },
            )
        })
        .collect()
}

fn invalid(reason: &str) -> BatchError {
    BatchError::InvalidRecord(reason.to_string())
}

fn validate_batch(
    bytes: &[u8],
    target: &Target<'_>,
    origin: AppendOrigin,
    now_ms: i64,
) -> Result<(BatchHeader, i64), AppendError> {
    let config = target.config;
    let header = BatchHeader::parse(bytes).ok_or(BatchError::Truncated {
        available: bytes.len(),
        needed: RECORD_BATCH_OVERHEAD,
    })?;
    if header.magic != batch::MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic(header.magic).into());
    }
    if bytes.len() > config.max_message_bytes() {
        return Err(AppendError::MessageTooLarge {
            size: bytes.len(),
            max: config.max_message_bytes(),
        });
    }
    batch::check_integrity(bytes)?;
    check_header_fields(&header, origin)?;
    let max_timestamp = walk_records(bytes, &header, target, now_ms)?;
    Ok((header, max_timestamp))
}

fn check_header_fields(header: &BatchHeader, origin: AppendOrigin) -> Result<(), BatchError> {
    if header.base_offset != 0 {
        return Err(invalid("a produced batch must have base offset 0"));
    }
    if header.records_count <= 0 {
        return Err(invalid("a batch must hold at least one record"));
    }
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
        return Err(invalid("record count does not match lastOffsetDelta"));
    }
    if header.is_control() && !origin.may_write_control_batches() {
        return Err(invalid("clients may not write control batches"));
    }
    // Only clients number their batches: markers and a coordinator's transactional batches
    // (TxnOffsetCommit's offsets) carry no sequence (KIP-98), as Kafka's LogValidator allows.
    if origin == AppendOrigin::Client && header.has_producer_id() && header.base_sequence < 0 {
        return Err(invalid("an idempotent batch needs a base sequence >= 0"));
    }
    if header.is_transactional() && !header.has_producer_id() {
        return Err(invalid("a transactional batch needs a producer id"));
    }
    Ok(())
}

/// Walks a batch's records: count and offset deltas must match the header, CreateTime
/// timestamps must be in range. Returns the records' max timestamp.
fn walk_records(
    bytes: &[u8],
    header: &BatchHeader,
    target: &Target<'_>,
    now_ms: i64,
) -> Result<i64, AppendError> {
    check_records(
        records::batch_records(bytes, header)?,
        header,
        target,
        now_ms,
    )
}

fn check_records(
    records: impl Iterator<Item = Result<RecordInfo, BatchError>>,
    header: &BatchHeader,
    target: &Target<'_>,
    now_ms: i64,
) -> Result<i64, AppendError> {
    let config = target.config;
    // Kafka's validateKey; control batches (transaction markers) carry keys of their own kind.
    let keys_required = config.cleanup_policy.compact && !header.is_control();
    let mut record_errors = Vec::new();
    let mut count = 0i32;
    let mut max_timestamp = batch::NO_TIMESTAMP;
    for record in records {
        let record = record?;
        // Stop at the declared count: a decompressed stream can hold far more than it claims.
        if count == header.records_count {
            return Err(invalid("more records than the batch header declares").into());
        }
        if record.offset_delta != count {
            return Err(invalid("record offset deltas must count up from 0").into());
        }
        let timestamp = header.base_timestamp.saturating_add(record.timestamp_delta);
        check_timestamp(timestamp, config, now_ms)?;
        if keys_required && !record.has_key {
            record_errors.push(RecordError {
                batch_index: count,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {}",
                    target.topic_partition
                ),
            });
        }
        max_timestamp = max_timestamp.max(timestamp);
        count += 1;
    }
    if count != header.records_count {
        return Err(invalid("record count does not match the records in the batch").into());
    }
    if !record_errors.is_empty() {
        return Err(AppendError::invalid_records(record_errors));
    }
    Ok(max_timestamp)
}

/// `message.timestamp.before.max.ms` / `after.max.ms` for CreateTime topics.
fn check_timestamp(timestamp: i64, config: &LogConfig, now_ms: i64) -> Result<(), AppendError> {
    if config.message_timestamp_type == TimestampType::LogAppendTime
        || timestamp == batch::NO_TIMESTAMP
    {
        return Ok(());
    }
    let too_old = timestamp < now_ms.saturating_sub(config.message_timestamp_before_max_ms);
    let too_new = timestamp > now_ms.saturating_add(config.message_timestamp_after_max_ms);
    if too_old || too_new {
        return Err(AppendError::InvalidTimestamp { timestamp, now_ms });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::batch::Compression;

    const NOW: i64 = 1_700_000_000_000;

    fn validate(
        records: &[u8],
        config: &LogConfig,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<Vec<ValidatedBatch>, AppendError> {
        let topic_partition = TopicPartition::new("t", 0);
        let target = Target {
            topic_partition: &topic_partition,
            config,
        };
        validate_records(records, &target, origin, now_ms)
    }

    #[test]
    fn a_compacted_topic_refuses_each_keyless_record_as_kafka_does() {
        let mut batch = TestBatch::simple(4, NOW);
        batch.records[1].key = None;
        batch.records[3].key = None;
        let mut compacted = LogConfig::default();
        compacted
            .apply_override("cleanup.policy", "compact")
            .unwrap();
        for codec in [Compression::None, Compression::Zstd] {
            let bytes = batch.clone().compressed(codec).encode();
            assert!(validate(&bytes, &LogConfig::default(), AppendOrigin::Client, NOW).is_ok());
            let error = validate(&bytes, &compacted, AppendOrigin::Client, NOW).unwrap_err();
            assert_eq!(error.kafka_error_code(), 87);
            let AppendError::InvalidRecords {
                record_errors,
                message,
            } = error
            else {
                panic!("not a record error: {error}");
            };
            let indexes: Vec<i32> = record_errors.iter().map(|e| e.batch_index).collect();
            assert_eq!(indexes, vec![1, 3]);
            assert_eq!(
                record_errors[0].message,
                "Compacted topic cannot accept message without key in topic partition t-0"
            );
            assert!(message.starts_with(
                "One or more records have been rejected due to 2 record errors in total"
            ));
            assert!(message.contains("RecordError(batchIndex=3, message='Compacted topic"));
        }
    }

    fn code(records: &[u8], config: &LogConfig) -> i16 {
        validate(records, config, AppendOrigin::Client, NOW)
            .unwrap_err()
            .kafka_error_code()
    }

    #[test]
    fn timestamps_outside_the_topics_before_and_after_bounds_are_refused() {
        let config = LogConfig {
            message_timestamp_before_max_ms: 60_000,
            message_timestamp_after_max_ms: 1_000,
            ..LogConfig::default()
        };
        let old = TestBatch::simple(1, NOW - 120_000).encode();
        let new = TestBatch::simple(1, NOW + 5_000).encode();
        assert_eq!(code(&old, &config), 32);
        assert_eq!(code(&new, &config), 32);
        let lax = LogConfig::default();
        assert!(validate(&old, &lax, AppendOrigin::Client, NOW).is_ok());
        let lax_future = LogConfig {
            message_timestamp_after_max_ms: 10_000,
            ..LogConfig::default()
        };
        assert!(validate(&new, &lax_future, AppendOrigin::Client, NOW).is_ok());
    }

    #[test]
    fn accepts_a_normal_batch_and_reports_its_max_timestamp() {
        let bytes = TestBatch::simple(3, NOW).encode();
        let v = validate(&bytes, &LogConfig::default(), AppendOrigin::Client, NOW).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].max_timestamp, NOW + 2);
    }

    #[test]
    fn maps_each_problem_to_its_kafka_error() {
        let config = LogConfig::default();
        let good = TestBatch::simple(3, NOW).encode();
        let mut v1 = good.clone();
        v1[16] = 1;
        assert_eq!(code(&v1, &config), 43);
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 0x10;
        assert_eq!(code(&flipped, &config), 2);
        assert_eq!(code(&good[..good.len() - 1], &config), 2);
        assert_eq!(code(&[], &config), 87);
        let small = LogConfig {
            max_message_bytes: (good.len() - 1) as i32,
            ..LogConfig::default()
        };
        assert_eq!(code(&good, &small), 10);
        let tiny_segment = LogConfig {
            segment_bytes: (good.len() - 1) as i32,
            ..LogConfig::default()
        };
        assert_eq!(code(&good, &tiny_segment), 18);
        let future = TestBatch::simple(1, NOW + 2 * 3_600_000).encode();
        assert_eq!(code(&future, &config), 32);
        let append_time = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            ..LogConfig::default()
        };
        assert!(validate(&future, &append_time, AppendOrigin::Client, NOW).is_ok());
    }

    #[test]
    fn count_and_header_inconsistencies_are_invalid_records() {
        let mut bad_count = TestBatch::simple(3, NOW);
        bad_count.records.pop();
        let mut bytes = bad_count.encode();
        // Claim three records while holding two: patch recordsCount and lastOffsetDelta.
        bytes[57..61].copy_from_slice(&3i32.to_be_bytes());
        bytes[23..27].copy_from_slice(&2i32.to_be_bytes());
        crate::batch::set_max_timestamp(&mut bytes, TimestampType::CreateTime, NOW + 1);
        assert_eq!(code(&bytes, &LogConfig::default()), 87);
        let mut no_seq = TestBatch::simple(1, NOW).idempotent(5, 0, 0);
        no_seq.base_sequence = -1;
        assert_eq!(code(&no_seq.encode(), &LogConfig::default()), 87);
    }

    #[test]
    fn only_a_coordinator_may_write_control_batches() {
        let mut control = TestBatch::simple(1, NOW);
        control.attributes = 0x20;
        let bytes = control.encode();
        assert_eq!(code(&bytes, &LogConfig::default()), 87);
        let config = LogConfig::default();
        assert!(validate(&bytes, &config, AppendOrigin::Coordinator, NOW).is_ok());
    }

    const CODECS: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Rewrites recordsCount and lastOffsetDelta and fixes the CRC, as an attacker would.
    fn forge_count(bytes: &mut [u8], count: i32) {
        bytes[57..61].copy_from_slice(&count.to_be_bytes());
        bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        let crc = crate::batch::compute_crc(bytes);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn compressed_batches_are_walked_and_their_max_timestamp_computed() {
        for codec in CODECS {
            let mut bytes = TestBatch::simple(40, NOW).compressed(codec).encode();
            // A producer's wrong max timestamp is corrected from the records.
            crate::batch::set_max_timestamp(&mut bytes, TimestampType::CreateTime, NOW);
            let v = validate(&bytes, &LogConfig::default(), AppendOrigin::Client, NOW).unwrap();
            assert_eq!(v[0].max_timestamp, NOW + 39, "{codec:?}");
            assert_eq!(v[0].header.compression(), codec);
        }
    }

    /// `plain`'s header (count included) over another records area, flagged with `codec`.
    fn with_area(plain: &[u8], area: &[u8], codec: Compression) -> Vec<u8> {
        let mut bytes = plain[..RECORD_BATCH_OVERHEAD].to_vec();
        bytes.extend_from_slice(area);
        let length = (bytes.len() - 12) as i32;
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes[21..23].copy_from_slice(&codec_id(codec).to_be_bytes());
        let count = i32::from_be_bytes(bytes[57..61].try_into().unwrap());
        forge_count(&mut bytes, count);
        bytes
    }

    fn codec_id(codec: Compression) -> i16 {
        CODECS.iter().position(|c| *c == codec).unwrap() as i16 + 1
    }

    #[test]
    fn raw_snappy_without_the_java_framing_is_accepted() {
        let plain = TestBatch::simple(5, NOW).encode();
        let area = snap::raw::Encoder::new()
            .compress_vec(&plain[RECORD_BATCH_OVERHEAD..])
            .unwrap();
        let bytes = with_area(&plain, &area, Compression::Snappy);
        let v = validate(&bytes, &LogConfig::default(), AppendOrigin::Client, NOW).unwrap();
        assert_eq!(v[0].max_timestamp, NOW + 4);
    }

    /// The batch from the report: ~100 bytes of gzip claiming 2^31-1 records. It used to be
    /// stored, and decoding it later aborted the broker.
    #[test]
    fn a_compressed_batch_claiming_more_records_than_it_holds_is_an_invalid_record() {
        for codec in CODECS {
            let mut bytes = TestBatch::simple(1, NOW).compressed(codec).encode();
            forge_count(&mut bytes, i32::MAX);
            assert!(bytes.len() < 160, "{codec:?}: {} bytes", bytes.len());
            assert_eq!(code(&bytes, &LogConfig::default()), 87, "{codec:?}");
            let mut fewer = TestBatch::simple(3, NOW).compressed(codec).encode();
            forge_count(&mut fewer, 2);
            assert_eq!(code(&fewer, &LogConfig::default()), 87, "{codec:?}");
        }
    }

    #[test]
    fn compressed_records_are_checked_like_uncompressed_ones() {
        let plain = TestBatch::simple(2, NOW).encode();
        let mut skipping = plain[RECORD_BATCH_OVERHEAD..].to_vec();
        // The second record's offsetDelta (after length, attributes, timestampDelta): 1 -> 2.
        let second = 1 + usize::from(skipping[0] / 2);
        assert_eq!(skipping[second + 3], 2);
        skipping[second + 3] = 4;
        for codec in CODECS {
            let future = TestBatch::simple(2, NOW + 2 * 3_600_000).compressed(codec);
            assert_eq!(code(&future.encode(), &LogConfig::default()), 32);
            let area = crate::batch::test_batches::compress(codec, &skipping);
            let bytes = with_area(&plain, &area, codec);
            assert_eq!(code(&bytes, &LogConfig::default()), 87, "{codec:?}");
        }
    }

    #[test]
    fn a_payload_that_does_not_decompress_is_a_corrupt_message() {
        let plain = TestBatch::simple(3, NOW).encode();
        for codec in CODECS {
            // Uncompressed records under a codec's flag: not a valid stream for any codec.
            let bytes = with_area(&plain, &plain[RECORD_BATCH_OVERHEAD..], codec);
            assert_eq!(code(&bytes, &LogConfig::default()), 2, "{codec:?}");
        }
    }
}
