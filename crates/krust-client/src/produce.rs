//! Produce: the rows of an Arrow batch (Spark's Kafka sink schema) written as an idempotent
//! producer with acks=all, one record batch per partition and request.

use std::collections::HashMap;

use arrow_array::{Array, RecordBatch};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use krust_storage::batch::{
    BatchHeader, Compression, LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD,
};
use krust_storage::records::put_varlong;
use krust_storage::{build_batch, Codec, LogConfig};

use crate::client::KafkaClient;
use crate::error::ClientError;
use crate::partitioner::partition_for_key;
use crate::sink_rows::SinkRows;

/// Produce v9: flexible, topic names (v13 moves to topic ids).
const PRODUCE_VERSION: i16 = 9;
/// InitProducerId v4 (KIP-360's epoch bump support).
const INIT_PRODUCER_ID_VERSION: i16 = 4;
/// A record batch's attributes bit for records of a transaction (KIP-98).
const TRANSACTIONAL_ATTRIBUTE: i16 = 0x10;
/// `acks=all`.
pub const ACKS_ALL: i16 = -1;
/// The largest uncompressed records area of one batch: with its header, the batch stays within
/// the broker's default `max.message.bytes` (1 MiB + LOG_OVERHEAD), above which the broker
/// answers MESSAGE_TOO_LARGE. Kafka's `batch.size` bounds batches for the Java producer.
const MAX_BATCH_AREA: usize = (1 << 20) + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD;

#[derive(Clone, Copy, Debug)]
pub struct ProduceOptions {
    /// -1 (all) or 1 (leader only).
    pub acks: i16,
    pub compression: Compression,
}

impl Default for ProduceOptions {
    fn default() -> Self {
        Self {
            acks: ACKS_ALL,
            compression: Compression::None,
        }
    }
}

/// The records of one partition, encoded as a records area.
struct PartitionRecords {
    area: Vec<u8>,
    count: i32,
    first_timestamp: i64,
}

impl KafkaClient {
    /// Produces every row of `rows`; `topic` (Spark's `topic` option) overrides the rows'
    /// topic column. Returns the number of records written.
    pub fn produce(
        &mut self,
        rows: &RecordBatch,
        topic: Option<&str>,
        options: &ProduceOptions,
        now_ms: i64,
    ) -> Result<usize, ClientError> {
        let sink = SinkRows::new(rows)?;
        // Each distinct topic once (name and partition count), then per row only a lookup of
        // the topic column's bytes: no allocation per row.
        let mut topics: Vec<(String, usize)> = Vec::new();
        let mut topic_index: HashMap<&[u8], usize> = HashMap::new();
        if let Some(t) = topic {
            topics.push((t.to_string(), self.partition_count(t)?));
        }
        // (topic index, partition) -> the partition's batches, in first-seen order.
        let mut groups: Vec<((usize, i32), Vec<PartitionRecords>)> = Vec::new();
        let mut index: HashMap<(usize, i32), usize> = HashMap::new();
        let sticky = self.producer.sticky;
        self.producer.sticky = sticky.wrapping_add(1);
        for row in 0..sink.len {
            let topic_slot = match topic {
                Some(_) => 0,
                None => {
                    let bytes = sink
                        .topic
                        .as_ref()
                        .and_then(|c| c.get(row))
                        .ok_or_else(|| {
                            ClientError::InvalidRows(format!(
                                "row {row} has no topic: give a topic column or the topic option"
                            ))
                        })?;
                    match topic_index.get(bytes) {
                        Some(&slot) => slot,
                        None => {
                            let name = String::from_utf8_lossy(bytes).into_owned();
                            let count = self.partition_count(&name)?;
                            topics.push((name, count));
                            topic_index.insert(bytes, topics.len() - 1);
                            topics.len() - 1
                        }
                    }
                }
            };
            let count = topics[topic_slot].1;
            let key = sink.key.as_ref().and_then(|c| c.get(row));
            let partition = match sink.partition.filter(|p| p.is_valid(row)) {
                Some(p) if (0..count as i64).contains(&i64::from(p.value(row))) => p.value(row),
                Some(p) => {
                    return Err(ClientError::InvalidRows(format!(
                        "row {row}: partition {} is not in topic {}'s range [0, {count})",
                        p.value(row),
                        topics[topic_slot].0
                    )))
                }
                None => match key {
                    Some(key) => partition_for_key(key, count),
                    None => (sticky % count.max(1)) as i32,
                },
            };
            let slot = *index.entry((topic_slot, partition)).or_insert_with(|| {
                groups.push(((topic_slot, partition), Vec::new()));
                groups.len() - 1
            });
            let record = Record {
                key,
                value: sink.value.get(row),
                headers: sink.headers(row),
            };
            append_record(&mut groups[slot].1, &record, now_ms)?;
        }
        let mut written = 0;
        for ((topic_slot, partition), batches) in groups {
            let topic = &topics[topic_slot].0;
            for records in batches {
                written += records.count as usize;
                self.send_batch(topic, partition, records, options)?;
            }
        }
        Ok(written)
    }

    /// The number of partitions of `topic`, from cached metadata (the topic is created if
    /// it is missing and the broker allows it, as the Java producer does).
    fn partition_count(&mut self, topic: &str) -> Result<usize, ClientError> {
        match self.known_partitions(topic) {
            0 => Ok(self.partitions_creating(topic)?.len()),
            known => Ok(known),
        }
    }

    /// Writes one batch to its partition leader, retrying retriable errors: the batch keeps
    /// its producer id and sequence, so the broker drops a retried duplicate.
    fn send_batch(
        &mut self,
        topic: &str,
        partition: i32,
        records: PartitionRecords,
        options: &ProduceOptions,
    ) -> Result<(), ClientError> {
        let (producer_id, producer_epoch) = self.producer_id()?;
        self.add_to_transaction(topic, partition)?;
        let transactional_id = self.transactional_id().map(|id| id.to_string());
        let key = (topic.to_string(), partition);
        let base_sequence = *self.producer.sequences.get(&key).unwrap_or(&0);
        let header = BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: MAGIC_V2,
            crc: 0,
            attributes: if transactional_id.is_some() {
                TRANSACTIONAL_ATTRIBUTE
            } else {
                0
            },
            last_offset_delta: records.count - 1,
            base_timestamp: records.first_timestamp,
            max_timestamp: records.first_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count: records.count,
        };
        let codec = Codec::with_topic_level(options.compression, &LogConfig::default());
        let batch = build_batch(&header, &records.area, codec)
            .map_err(|e| ClientError::InvalidRows(format!("cannot compress the records: {e}")))?;
        let request = ProduceRequest::default()
            .with_transactional_id(
                transactional_id.map(|id| TransactionalId(StrBytes::from_string(id))),
            )
            .with_acks(options.acks)
            .with_timeout_ms(self.request_timeout().as_millis() as i32)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(batch)))])]);
        self.with_retries(
            topic,
            || format!("{topic}-{partition}"),
            |client| {
                let leader = client.leader(topic, partition)?;
                let response = client.connection(leader)?.send(&request, PRODUCE_VERSION)?;
                let answer = response
                    .responses
                    .iter()
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == partition)
                    .ok_or_else(|| ClientError::UnknownPartition {
                        topic: topic.to_string(),
                        partition,
                    })?;
                match ResponseError::try_from_code(answer.error_code) {
                    None | Some(ResponseError::DuplicateSequenceNumber) => Ok(()),
                    Some(error) if error.is_retriable() => Err(ClientError::Kafka {
                        api: "Produce",
                        topic: topic.to_string(),
                        partition,
                        error,
                    }),
                    Some(error) => Err(ClientError::ProduceRejected {
                        topic: topic.to_string(),
                        partition,
                        message: answer
                            .error_message
                            .as_ref()
                            .map_or_else(|| format!("{error:?}"), |m| format!("{error:?}: {m}")),
                    }),
                }
            },
        )?;
        let next = krust_storage::batch::increment_sequence(base_sequence, records.count);
        self.producer.sequences.insert(key, next);
        Ok(())
    }

    /// This client's producer id and epoch, asked for once (InitProducerId without a
    /// transactional id: an idempotent producer).
    fn producer_id(&mut self) -> Result<(i64, i16), ClientError> {
        if let Some(id) = self.producer.id {
            return Ok(id);
        }
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = self.with_retries(
            "",
            || "a producer id".to_string(),
            |client| {
                let response = client
                    .bootstrap_connection()?
                    .send(&request, INIT_PRODUCER_ID_VERSION)?;
                match ResponseError::try_from_code(response.error_code) {
                    None => Ok(response),
                    Some(error) => Err(ClientError::Kafka {
                        api: "InitProducerId",
                        topic: String::new(),
                        partition: -1,
                        error,
                    }),
                }
            },
        )?;
        let id = (response.producer_id.0, response.producer_epoch);
        self.producer.id = Some(id);
        Ok(id)
    }
}

/// One row to produce.
struct Record<'a> {
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Option<crate::sink_rows::RowHeaders<'a>>,
}

/// Appends `record` to the partition's last batch, or to a new one when it would take that
/// batch's records area past MAX_BATCH_AREA (a record larger than that goes alone).
fn append_record(
    batches: &mut Vec<PartitionRecords>,
    record: &Record<'_>,
    now_ms: i64,
) -> Result<(), ClientError> {
    let new_batch = || PartitionRecords {
        area: Vec::new(),
        count: 0,
        first_timestamp: now_ms,
    };
    if batches.is_empty() {
        batches.push(new_batch());
    }
    let batch = batches.last_mut().expect("pushed above when missing");
    let before = batch.area.len();
    encode_record(batch, record.key, record.value, record.headers.as_ref())?;
    if batch.count > 1 && batch.area.len() > MAX_BATCH_AREA {
        // The record's offset delta depends on its batch: take it back, encode it anew.
        batch.area.truncate(before);
        batch.count -= 1;
        batches.push(new_batch());
        let batch = batches.last_mut().expect("just pushed");
        encode_record(batch, record.key, record.value, record.headers.as_ref())?;
    }
    Ok(())
}

/// Appends one record to `batch`: timestamps are the batch's (CreateTime, now). The record's
/// length is computed first, so that the record is written straight into the area.
fn encode_record(
    batch: &mut PartitionRecords,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Option<&crate::sink_rows::RowHeaders<'_>>,
) -> Result<(), ClientError> {
    let offset_delta = i64::from(batch.count);
    let header_count = headers.map_or(0, |h| h.len());
    // attributes (1 byte), timestamp delta (0: 1 byte), offset delta, key, value, headers.
    let mut body = 2 + varlong_size(offset_delta) + bytes_size(key) + bytes_size(value);
    body += varlong_size(header_count as i64);
    if let Some(headers) = headers {
        for (key, value) in headers.iter() {
            body += bytes_size(Some(key)) + bytes_size(value);
        }
    }
    let area = &mut batch.area;
    area.reserve(body + 5);
    put_varlong(area, body as i64);
    area.push(0);
    put_varlong(area, 0);
    put_varlong(area, offset_delta);
    put_bytes(area, key);
    put_bytes(area, value);
    put_varlong(area, header_count as i64);
    if let Some(headers) = headers {
        for (key, value) in headers.iter() {
            put_bytes(area, Some(key));
            put_bytes(area, value);
        }
    }
    batch.count = batch
        .count
        .checked_add(1)
        .ok_or_else(|| ClientError::InvalidRows("too many records for one batch".to_string()))?;
    Ok(())
}

/// The bytes of `value` as a zigzag varint.
fn varlong_size(value: i64) -> usize {
    let zigzag = ((value << 1) ^ (value >> 63)) as u64;
    (64 - (zigzag | 1).leading_zeros() as usize).div_ceil(7)
}

/// The bytes `put_bytes` writes for `bytes`.
fn bytes_size(bytes: Option<&[u8]>) -> usize {
    match bytes {
        Some(bytes) => varlong_size(bytes.len() as i64) + bytes.len(),
        None => 1,
    }
}

/// A varint-length-prefixed byte field; -1 for null.
fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            put_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        None => put_varlong(out, -1),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{BinaryBuilder, ListBuilder, StringBuilder, StructBuilder};
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};
    use arrow_array::{ArrayRef, BinaryArray, StringArray};
    use arrow_schema::{DataType, Field, Fields};

    use super::*;
    use crate::columns::RecordColumns;
    use crate::decode::append_records;
    use crate::transactions::AbortedTransactions;

    fn no_aborts() -> AbortedTransactions {
        AbortedTransactions::new([])
    }

    /// Three sink rows: a keyed record with two headers of the same key, a record without
    /// key or headers, and a tombstone.
    fn sink_batch() -> RecordBatch {
        let fields = Fields::from(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", DataType::Binary, true),
        ]);
        let mut headers = ListBuilder::new(StructBuilder::from_fields(fields, 0));
        for (key, value) in [("h", Some(&b"1"[..])), ("h", None)] {
            let entry = headers.values();
            entry
                .field_builder::<StringBuilder>(0)
                .unwrap()
                .append_value(key);
            entry
                .field_builder::<BinaryBuilder>(1)
                .unwrap()
                .append_option(value);
            entry.append(true);
        }
        headers.append(true);
        headers.append(false);
        headers.append(true);
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "key",
                Arc::new(BinaryArray::from(vec![Some(&b"k1"[..]), None, Some(b"k3")])),
            ),
            (
                "value",
                Arc::new(StringArray::from(vec![Some("v1"), Some("v2"), None])),
            ),
            ("headers", Arc::new(headers.finish())),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn encoded_rows_decode_to_the_same_columns_with_every_codec() {
        let rows = sink_batch();
        let sink = SinkRows::new(&rows).unwrap();
        for compression in Compression::ALL {
            let mut records = PartitionRecords {
                area: Vec::new(),
                count: 0,
                first_timestamp: 1_700_000_000_123,
            };
            for row in 0..sink.len {
                let key = sink.key.as_ref().and_then(|c| c.get(row));
                encode_record(
                    &mut records,
                    key,
                    sink.value.get(row),
                    sink.headers(row).as_ref(),
                )
                .unwrap();
            }
            let header = BatchHeader {
                base_offset: 40,
                batch_length: 0,
                partition_leader_epoch: 0,
                magic: MAGIC_V2,
                crc: 0,
                attributes: 0,
                last_offset_delta: records.count - 1,
                base_timestamp: records.first_timestamp,
                max_timestamp: records.first_timestamp,
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: 0,
                records_count: records.count,
            };
            let codec = Codec::with_topic_level(compression, &LogConfig::default());
            let batch = build_batch(&header, &records.area, codec).unwrap();

            let mut columns = RecordColumns::new(true);
            let decoded =
                append_records(&batch, "t", 2, &(41..100), &mut no_aborts(), &mut columns).unwrap();
            assert_eq!(decoded.next_offset, Some(43), "{compression:?}");
            let out = columns.finish();
            // Offset 40 is before the range: only the last two rows come back.
            assert_eq!(out.num_rows(), 2, "{compression:?}");
            let offsets = out.column(4).as_primitive::<Int64Type>();
            assert_eq!(offsets.values(), &[41, 42]);
            let keys = out.column(0).as_binary::<i32>();
            assert!(keys.is_null(0));
            assert_eq!(keys.value(1), b"k3");
            let values = out.column(1).as_binary::<i32>();
            assert_eq!(values.value(0), b"v2");
            assert!(values.is_null(1), "a tombstone stays null");
            let timestamps = out.column(5).as_primitive::<TimestampMicrosecondType>();
            assert_eq!(timestamps.value(0), 1_700_000_000_123_000);
            assert_eq!(out.column(2).as_string::<i32>().value(0), "t");

            let mut all = RecordColumns::new(true);
            append_records(&batch, "t", 2, &(0..100), &mut no_aborts(), &mut all).unwrap();
            let all = all.finish();
            let headers = all.column(7).as_list::<i32>();
            let first = headers.value(0);
            let first = first.as_struct();
            assert_eq!(first.len(), 2, "repeated header keys are both kept");
            assert_eq!(first.column(0).as_string::<i32>().value(1), "h");
            assert_eq!(first.column(1).as_binary::<i32>().value(0), b"1");
            assert!(first.column(1).is_null(1));
            assert_eq!(headers.value(1).len(), 0);
        }
    }

    #[test]
    fn batches_stay_within_the_brokers_default_max_message_bytes() {
        // Spark hands the sink 10,000 rows at a time; 100-byte values without a key all go
        // to one partition: more than 1 MiB, which the broker refuses in one batch.
        let value = [b'x'; 100];
        let record = Record {
            key: None,
            value: Some(&value),
            headers: None,
        };
        let mut batches = Vec::new();
        for _ in 0..10_000 {
            append_record(&mut batches, &record, 0).unwrap();
        }
        let broker_limit = (1 << 20) + LOG_OVERHEAD;
        assert!(batches.len() > 1);
        for batch in &batches {
            assert!(RECORD_BATCH_OVERHEAD + batch.area.len() <= broker_limit);
        }
        let counts: i32 = batches.iter().map(|b| b.count).sum();
        assert_eq!(counts, 10_000);
    }

    #[test]
    fn varlong_sizes_are_the_lengths_put_varlong_writes() {
        let mut values = vec![0, 1, -1, 63, 64, -64, -65, i64::MAX, i64::MIN];
        values.extend((0..63).flat_map(|bit| [1i64 << bit, (1i64 << bit) - 1, -(1i64 << bit)]));
        for value in values {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(varlong_size(value), out.len(), "{value}");
        }
    }

    #[test]
    fn rows_without_a_value_column_are_refused() {
        let rows = RecordBatch::try_from_iter(vec![(
            "key",
            Arc::new(BinaryArray::from(vec![Some(&b"k"[..])])) as ArrayRef,
        )])
        .unwrap();
        let error = SinkRows::new(&rows).err().unwrap();
        assert!(
            error.to_string().contains("value column is missing"),
            "{error}"
        );
    }

    #[test]
    fn a_value_column_of_the_wrong_type_is_refused() {
        let rows = RecordBatch::try_from_iter(vec![(
            "value",
            Arc::new(arrow_array::Int64Array::from(vec![1])) as ArrayRef,
        )])
        .unwrap();
        let error = SinkRows::new(&rows).err().unwrap();
        assert!(
            error.to_string().contains("value must be binary or string"),
            "{error}"
        );
    }
}
