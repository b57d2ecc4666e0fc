//! The transactional producer (KIP-98) behind the Spark sink's exactly-once writes: a
//! transactional id, partitions added to its transaction before they are written, consumer
//! group offsets committed inside the transaction (TxnOffsetCommit), then EndTxn. As with
//! Kafka's Java producer, InitProducerId fences older producers of the same transactional id
//! and aborts (or completes) the transaction they left open.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest,
    GroupId, InitProducerIdRequest, OffsetFetchRequest, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::KafkaClient;
use crate::error::ClientError;
use crate::transaction_state::TransactionState;

/// FindCoordinator v3: one key, flexible (v4 batches keys).
const FIND_COORDINATOR_VERSION: i16 = 3;
const INIT_PRODUCER_ID_VERSION: i16 = 4;
/// AddPartitionsToTxn v3: the last version for clients (v4+ is the brokers' batched form).
const ADD_PARTITIONS_VERSION: i16 = 3;
const ADD_OFFSETS_VERSION: i16 = 3;
const TXN_OFFSET_COMMIT_VERSION: i16 = 3;
const END_TXN_VERSION: i16 = 3;
/// OffsetFetch v7: one group, `require_stable` (KIP-447).
const OFFSET_FETCH_VERSION: i16 = 7;

/// FindCoordinator key types.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A Kafka error code of a transaction request, as a ClientError (None when it is 0).
fn checked(api: &'static str, target: &str, code: i16) -> Result<(), ClientError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(error) => Err(ClientError::Transaction {
            api,
            target: target.to_string(),
            error,
        }),
    }
}

impl KafkaClient {
    /// Makes this client the producer of `transactional_id` (InitProducerId): an older
    /// producer of the same id is fenced, its open transaction aborted. Sequences restart.
    pub fn init_transactions(
        &mut self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
    ) -> Result<(), ClientError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(str_bytes(transactional_id))))
            .with_transaction_timeout_ms(transaction_timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = self.with_retries(
            "",
            || format!("transactional id {transactional_id}"),
            |client| {
                let coordinator = client.coordinator(TRANSACTION, transactional_id)?;
                let response = client
                    .connection(coordinator)?
                    .send(&request, INIT_PRODUCER_ID_VERSION)?;
                checked("InitProducerId", transactional_id, response.error_code)?;
                Ok(response)
            },
        )?;
        self.producer.id = Some((response.producer_id.0, response.producer_epoch));
        self.producer.sequences.clear();
        self.producer.transaction = Some(TransactionState {
            transactional_id: transactional_id.to_string(),
            added: HashSet::new(),
            open: false,
        });
        Ok(())
    }

    /// The transactional id this client produces with, if any.
    pub(crate) fn transactional_id(&self) -> Option<&str> {
        self.producer
            .transaction
            .as_ref()
            .map(|t| t.transactional_id.as_str())
    }

    /// Adds `topic`-`partition` to the open transaction before its first record is sent.
    pub(crate) fn add_to_transaction(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<(), ClientError> {
        let Some(state) = self.producer.transaction.as_ref() else {
            return Ok(());
        };
        if state.added.contains(&(topic.to_string(), partition)) {
            return Ok(());
        }
        let transactional_id = state.transactional_id.clone();
        let (producer_id, epoch) = self.producer.id.ok_or(ClientError::NoTransaction)?;
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(str_bytes(&transactional_id)))
            .with_v3_and_below_producer_id(ProducerId(producer_id))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(vec![partition])]);
        let target = format!("{topic}-{partition} in transaction {transactional_id}");
        self.with_retries(
            "",
            || target.clone(),
            |client| {
                let coordinator = client.coordinator(TRANSACTION, &transactional_id)?;
                let response = client
                    .connection(coordinator)?
                    .send(&request, ADD_PARTITIONS_VERSION)?;
                for result in response.results_by_topic_v3_and_below.iter() {
                    for p in result.results_by_partition.iter() {
                        checked("AddPartitionsToTxn", &target, p.partition_error_code)?;
                    }
                }
                checked("AddPartitionsToTxn", &target, response.error_code)
            },
        )?;
        let state = self.producer.transaction.as_mut().expect("checked above");
        state.added.insert((topic.to_string(), partition));
        state.open = true;
        Ok(())
    }

    /// Commits `offset` (and `metadata`) for `group` on `topic`-`partition` as part of the
    /// open transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator):
    /// the offset becomes visible if and only if the transaction commits.
    pub fn send_offsets_to_transaction(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        metadata: Option<&str>,
    ) -> Result<(), ClientError> {
        let transactional_id = self
            .transactional_id()
            .ok_or(ClientError::NoTransaction)?
            .to_string();
        let (producer_id, epoch) = self.producer.id.ok_or(ClientError::NoTransaction)?;
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&transactional_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(str_bytes(group)));
        self.with_retries(
            "",
            || format!("group {group} in transaction {transactional_id}"),
            |client| {
                let coordinator = client.coordinator(TRANSACTION, &transactional_id)?;
                let response = client
                    .connection(coordinator)?
                    .send(&add, ADD_OFFSETS_VERSION)?;
                checked("AddOffsetsToTxn", group, response.error_code)
            },
        )?;
        if let Some(state) = self.producer.transaction.as_mut() {
            state.open = true;
        }
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&transactional_id)))
            .with_group_id(GroupId(str_bytes(group)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_member_id(StrBytes::default())
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(metadata.map(str_bytes))])]);
        self.with_retries(
            "",
            || format!("offsets of group {group}"),
            |client| {
                let coordinator = client.coordinator(GROUP, group)?;
                let response = client
                    .connection(coordinator)?
                    .send(&commit, TXN_OFFSET_COMMIT_VERSION)?;
                for t in response.topics.iter() {
                    for p in t.partitions.iter() {
                        checked("TxnOffsetCommit", group, p.error_code)?;
                    }
                }
                Ok(())
            },
        )
    }

    /// Ends the open transaction (EndTxn): its records and offsets become visible to
    /// read_committed readers when `commit`, are discarded otherwise.
    pub fn end_transaction(&mut self, commit: bool) -> Result<(), ClientError> {
        let state = self
            .producer
            .transaction
            .as_ref()
            .ok_or(ClientError::NoTransaction)?;
        if !state.open {
            return Ok(());
        }
        let transactional_id = state.transactional_id.clone();
        let (producer_id, epoch) = self.producer.id.ok_or(ClientError::NoTransaction)?;
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&transactional_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        self.with_retries(
            "",
            || format!("the end of transaction {transactional_id}"),
            |client| {
                let coordinator = client.coordinator(TRANSACTION, &transactional_id)?;
                let response = client
                    .connection(coordinator)?
                    .send(&request, END_TXN_VERSION)?;
                checked("EndTxn", &transactional_id, response.error_code)
            },
        )?;
        let state = self.producer.transaction.as_mut().expect("checked above");
        state.added.clear();
        state.open = false;
        Ok(())
    }

    /// The offset and metadata `group` committed for `topic`-`partition` (None if none),
    /// waiting for pending transactional commits to complete (`require_stable`).
    pub fn committed_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Option<(i64, Option<String>)>, ClientError> {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(str_bytes(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partition_indexes(vec![partition])]))
            .with_require_stable(true);
        self.with_retries(
            "",
            || format!("the offsets of group {group}"),
            |client| {
                let coordinator = client.coordinator(GROUP, group)?;
                let response = client
                    .connection(coordinator)?
                    .send(&request, OFFSET_FETCH_VERSION)?;
                checked("OffsetFetch", group, response.error_code)?;
                let answer = response
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition);
                let Some(answer) = answer else {
                    return Ok(None);
                };
                checked("OffsetFetch", group, answer.error_code)?;
                Ok((answer.committed_offset >= 0).then(|| {
                    (
                        answer.committed_offset,
                        answer.metadata.as_ref().map(|m| m.to_string()),
                    )
                }))
            },
        )
    }

    /// The node coordinating `key` (a group or a transactional id), asked of a bootstrap
    /// server; its address is added to the known brokers.
    fn coordinator(&mut self, key_type: i8, key: &str) -> Result<i32, ClientError> {
        let request = FindCoordinatorRequest::default()
            .with_key(str_bytes(key))
            .with_key_type(key_type);
        let response = self
            .bootstrap_connection()?
            .send(&request, FIND_COORDINATOR_VERSION)?;
        checked("FindCoordinator", key, response.error_code)?;
        let node = response.node_id.0;
        self.add_broker(
            node,
            format!("{}:{}", response.host.as_str(), response.port),
        );
        Ok(node)
    }
}
