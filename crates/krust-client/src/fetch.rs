//! Fetch: reads an offset range `[start, end)` of one partition as Arrow record batches.

use std::ops::Range;

use arrow_array::RecordBatch;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::KafkaClient;
use crate::columns::RecordColumns;
use crate::decode::append_records;
use crate::error::ClientError;
use crate::list_offsets::OffsetSpec;
use crate::transactions::AbortedTransactions;

/// Fetch v12: the last version that names topics (v13+ needs topic ids).
const FETCH_VERSION: i16 = 12;
/// `fetch.max.bytes` default.
const FETCH_MAX_BYTES: i32 = 50 << 20;

/// How a range is read.
#[derive(Clone, Copy, Debug)]
pub struct FetchOptions {
    pub include_headers: bool,
    /// `isolation.level=read_committed`: read up to the last stable offset, without aborted
    /// transactions.
    pub read_committed: bool,
    /// `max.partition.fetch.bytes`.
    pub max_partition_bytes: i32,
    /// `fetch.max.wait.ms`.
    pub max_wait_ms: i32,
    /// About how many rows each Arrow batch holds (a batch ends at a fetch boundary).
    pub rows_per_batch: usize,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            include_headers: false,
            read_committed: false,
            max_partition_bytes: 1 << 20,
            max_wait_ms: 500,
            rows_per_batch: 64 * 1024,
        }
    }
}

/// Reads `[start, end)` of one partition, a batch of rows at a time.
pub struct RangeReader {
    client: KafkaClient,
    topic: String,
    partition: i32,
    range: Range<i64>,
    /// The next offset to fetch.
    position: i64,
    options: FetchOptions,
    columns: RecordColumns,
}

impl RangeReader {
    pub fn new(
        client: KafkaClient,
        topic: &str,
        partition: i32,
        range: Range<i64>,
        options: FetchOptions,
    ) -> Self {
        Self {
            client,
            topic: topic.to_string(),
            partition,
            position: range.start,
            range,
            options,
            columns: RecordColumns::new(options.include_headers),
        }
    }

    /// The next batch of rows, or `None` once the whole range was read.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, ClientError> {
        while self.position < self.range.end && self.columns.len() < self.options.rows_per_batch {
            self.fetch_once()?;
        }
        Ok((!self.columns.is_empty()).then(|| self.columns.finish()))
    }

    /// One Fetch from `position`, its records appended to the columns.
    fn fetch_once(&mut self) -> Result<(), ClientError> {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(self.options.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(i8::from(self.options.read_committed))
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(self.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(self.position)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(self.options.max_partition_bytes)])]);
        let (topic, partition) = (self.topic.clone(), self.partition);
        let answer = self.client.with_retries(
            &topic,
            || format!("{topic}-{partition}"),
            |client| {
                let leader = client.leader(&topic, partition)?;
                let response = client.connection(leader)?.send(&request, FETCH_VERSION)?;
                let answer = response
                    .responses
                    .into_iter()
                    .flat_map(|t| t.partitions)
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| ClientError::UnknownPartition {
                        topic: topic.clone(),
                        partition,
                    })?;
                match ResponseError::try_from_code(answer.error_code) {
                    None | Some(ResponseError::OffsetOutOfRange) => Ok(answer),
                    Some(error) => Err(ClientError::Kafka {
                        api: "Fetch",
                        topic: topic.clone(),
                        partition,
                        error,
                    }),
                }
            },
        )?;
        if answer.error_code == ResponseError::OffsetOutOfRange.code() {
            return Err(self.out_of_range());
        }
        let records = answer.records.unwrap_or_default();
        let mut aborted = AbortedTransactions::new(
            answer
                .aborted_transactions
                .iter()
                .flatten()
                .map(|t| (t.producer_id.0, t.first_offset)),
        );
        let decoded = append_records(
            &records,
            &self.topic,
            self.partition,
            &(self.position..self.range.end),
            &mut aborted,
            &mut self.columns,
        )
        .map_err(|source| ClientError::CorruptBatch {
            topic: self.topic.clone(),
            partition: self.partition,
            source,
        })?;
        // read_committed reads only up to the last stable offset.
        let readable_end = if self.options.read_committed {
            answer.last_stable_offset
        } else {
            answer.high_watermark
        };
        match decoded.next_offset {
            Some(next) => self.position = next.max(self.position),
            None if readable_end <= self.position => {
                return Err(ClientError::RangePastEnd {
                    topic: self.topic.clone(),
                    partition: self.partition,
                    end: self.range.end,
                    high_watermark: readable_end,
                })
            }
            None => {}
        }
        Ok(())
    }

    /// The error for an offset the log no longer (or not yet) holds.
    fn out_of_range(&mut self) -> ClientError {
        let earliest =
            self.client
                .list_offset(&self.topic, self.partition, OffsetSpec::Earliest, false);
        match earliest {
            Ok(Some(log_start_offset)) if log_start_offset > self.position => {
                ClientError::DataLoss {
                    topic: self.topic.clone(),
                    partition: self.partition,
                    start: self.position,
                    end: self.range.end,
                    log_start_offset,
                }
            }
            Ok(_) => match self.client.list_offset(
                &self.topic,
                self.partition,
                OffsetSpec::Latest,
                self.options.read_committed,
            ) {
                Ok(latest) => ClientError::RangePastEnd {
                    topic: self.topic.clone(),
                    partition: self.partition,
                    end: self.range.end,
                    high_watermark: latest.unwrap_or(-1),
                },
                Err(e) => e,
            },
            Err(e) => e,
        }
    }
}
