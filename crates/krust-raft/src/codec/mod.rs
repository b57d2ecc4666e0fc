//! Raft entries as Kafka record batches: one batch of one record per entry, the batch's
//! partitionLeaderEpoch the term and the record's offset the index.
//!
//! - a normal entry is a data record with no key whose value is the metadata record;
//! - a blank entry (a new leader's first) is a LeaderChangeMessage control record (type 2);
//! - a membership entry is a VotersRecord control record (type 6, KIP-853).
//!
//! Reading also accepts the multi-record data batches earlier (single-node) krust wrote: each
//! record is one entry of the batch's epoch.

use std::io;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::leader_change_message::{self, LeaderChangeMessage};
use kafka_protocol::messages::voters_record::{self, VotersRecord};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use openraft::entry::RaftEntry;
use openraft::EntryPayload;

use crate::voters::{StaticVoters, Voter};
use crate::{epoch_of, invalid_data, Entry, LogId, MetadataRecord, NodeId};

/// Kafka's ControlRecordType ids.
pub const LEADER_CHANGE: i16 = 2;
pub const KRAFT_VERSION: i16 = 5;
pub const KRAFT_VOTERS: i16 = 6;
/// The listener name written in VotersRecord endpoints.
pub const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// What encoding needs beyond the entry itself.
pub struct EncodeContext<'a> {
    /// The leader of the blank entry's term (the LeaderChangeMessage's leaderId).
    pub leader_id: NodeId,
    /// The voters, listed in a LeaderChangeMessage.
    pub voters: &'a StaticVoters,
    /// Stamped on the batches.
    pub now_ms: i64,
}

/// Appends the batch of `entry` to `out`.
pub fn encode_entry(out: &mut BytesMut, entry: &Entry, cx: &EncodeContext) -> io::Result<()> {
    let (key, value, control): (Option<Bytes>, Bytes, bool) = match &entry.payload {
        EntryPayload::Normal(MetadataRecord(value)) => (None, value.clone(), false),
        EntryPayload::Blank => (
            Some(control_key(LEADER_CHANGE)),
            leader_change_value(cx.leader_id, cx.voters)?,
            true,
        ),
        EntryPayload::Membership(membership) => {
            let membership: &crate::Membership = membership;
            let voters = StaticVoters::from_membership(membership)
                .map_err(|e| invalid_data(e.to_string()))?;
            (
                Some(control_key(KRAFT_VOTERS)),
                voters_value(&voters)?,
                true,
            )
        }
    };
    let offset = i64::try_from(entry.index()).map_err(|_| invalid_data("index past i64"))?;
    let record = Record {
        transactional: false,
        control,
        delete_horizon: false,
        partition_leader_epoch: epoch_of(entry.log_id.leader_id.term)?,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp: cx.now_ms,
        key,
        value: Some(value),
        headers: Default::default(),
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(out, [&record], &options).map_err(io::Error::other)
}

/// The entries `batches` hold, in offset order.
pub fn decode_entries(mut batches: Bytes) -> io::Result<Vec<Entry>> {
    let sets =
        RecordBatchDecoder::decode_all(&mut batches).map_err(|e| invalid_data(e.to_string()))?;
    let mut entries = Vec::new();
    for record in sets.into_iter().flat_map(|set| set.records) {
        entries.push(decode_record(record)?);
    }
    Ok(entries)
}

fn decode_record(record: Record) -> io::Result<Entry> {
    let index = u64::try_from(record.offset)
        .map_err(|_| invalid_data(format!("negative offset {}", record.offset)))?;
    let term = u64::try_from(record.partition_leader_epoch).map_err(|_| {
        invalid_data(format!(
            "offset {}: no leader epoch ({})",
            record.offset, record.partition_leader_epoch
        ))
    })?;
    let log_id = LogId::new_term_index(term, index);
    let missing_value = || invalid_data(format!("offset {}: record without a value", index));
    if !record.control {
        let value = record.value.ok_or_else(missing_value)?;
        return Ok(Entry::new_normal(log_id, MetadataRecord(value)));
    }
    let kind = record
        .key
        .as_ref()
        .filter(|key| key.len() >= 4)
        .map(|key| i16::from_be_bytes([key[2], key[3]]));
    match kind {
        Some(LEADER_CHANGE) => Ok(Entry::new_blank(log_id)),
        Some(KRAFT_VOTERS) => {
            let mut value = record.value.ok_or_else(missing_value)?;
            let voters = decode_voters(&mut value)?;
            Ok(Entry::new_membership(log_id, voters.membership()))
        }
        other => Err(invalid_data(format!(
            "offset {index}: control record of type {other:?} is not a Raft entry"
        ))),
    }
}

fn control_key(kind: i16) -> Bytes {
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(kind);
    key.freeze()
}

fn leader_change_value(leader_id: NodeId, voters: &StaticVoters) -> io::Result<Bytes> {
    let listed: Vec<_> = voters
        .voters()
        .iter()
        .map(|v| leader_change_message::Voter::default().with_voter_id(v.id))
        .collect();
    let message = LeaderChangeMessage::default()
        .with_version(0)
        .with_leader_id(BrokerId(leader_id))
        .with_voters(listed);
    encode_message(&message, 0)
}

/// The VotersRecord (version 0) of `voters`, as Kafka writes it in the log and in snapshots.
pub fn voters_value(voters: &StaticVoters) -> io::Result<Bytes> {
    let listed = voters
        .voters()
        .iter()
        .map(|v| {
            let endpoint = voters_record::Endpoint::default()
                .with_name(StrBytes::from_static_str(CONTROLLER_LISTENER))
                .with_host(StrBytes::from_string(v.host.clone()))
                .with_port(v.port);
            let kraft = voters_record::KRaftVersionFeature::default()
                .with_min_supported_version(0)
                .with_max_supported_version(1);
            voters_record::Voter::default()
                .with_voter_id(BrokerId(v.id))
                .with_endpoints(vec![endpoint])
                .with_k_raft_version_feature(kraft)
        })
        .collect();
    encode_message(
        &VotersRecord::default().with_version(0).with_voters(listed),
        0,
    )
}

/// The voters a VotersRecord value names (its first endpoint each).
pub fn decode_voters(value: &mut Bytes) -> io::Result<StaticVoters> {
    let record = VotersRecord::decode(value, 0).map_err(|e| invalid_data(e.to_string()))?;
    let voters = record
        .voters
        .into_iter()
        .map(|v| {
            let endpoint =
                v.endpoints.into_iter().next().ok_or_else(|| {
                    invalid_data(format!("voter {} has no endpoint", v.voter_id.0))
                })?;
            Ok(Voter {
                id: v.voter_id.0,
                host: endpoint.host.to_string(),
                port: endpoint.port,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    StaticVoters::new(voters).map_err(|e| invalid_data(e.to_string()))
}

/// KRaftVersionRecord (version 0): `kraft.version` 1, the version VotersRecord comes with.
pub fn kraft_version_value() -> Bytes {
    let mut value = BytesMut::with_capacity(5);
    value.put_i16(0);
    value.put_i16(1);
    value.put_u8(0); // no tagged fields
    value.freeze()
}

fn encode_message<M: Encodable>(message: &M, version: i16) -> io::Result<Bytes> {
    let mut out = BytesMut::new();
    message
        .encode(&mut out, version)
        .map_err(|e| invalid_data(e.to_string()))?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests;
