//! ListOffsets: a partition's earliest or latest offset, or the first offset at or after a
//! timestamp.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::KafkaClient;
use crate::error::ClientError;

/// ListOffsets v7 (KIP-734's max-timestamp lookup is not needed here).
const LIST_OFFSETS_VERSION: i16 = 7;
/// Kafka's `ListOffsetsRequest.LATEST_TIMESTAMP` and `EARLIEST_TIMESTAMP`.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

/// Which offset to look up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    /// The high watermark (read_uncommitted) or the last stable offset (read_committed).
    Latest,
    /// The first offset whose timestamp is at or after this many ms since the epoch.
    Timestamp(i64),
}

impl KafkaClient {
    /// The offset `spec` names in `topic`-`partition`; `None` when no record has a timestamp
    /// at or after the one asked for.
    pub fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        read_committed: bool,
    ) -> Result<Option<i64>, ClientError> {
        let timestamp = match spec {
            OffsetSpec::Earliest => EARLIEST,
            OffsetSpec::Latest => LATEST,
            OffsetSpec::Timestamp(ms) => ms,
        };
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(i8::from(read_committed))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp)])]);
        self.with_retries(
            topic,
            || format!("{topic}-{partition}"),
            |client| {
                let leader = client.leader(topic, partition)?;
                let response = client
                    .connection(leader)?
                    .send(&request, LIST_OFFSETS_VERSION)?;
                let answer = response
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| ClientError::UnknownPartition {
                        topic: topic.to_string(),
                        partition,
                    })?;
                if let Some(error) = ResponseError::try_from_code(answer.error_code) {
                    return Err(ClientError::Kafka {
                        api: "ListOffsets",
                        topic: topic.to_string(),
                        partition,
                        error,
                    });
                }
                Ok((answer.offset >= 0).then_some(answer.offset))
            },
        )
    }
}
