use super::*;
use crate::voters::StaticVoters;

fn voters() -> StaticVoters {
    StaticVoters::new(vec![Voter {
        id: 1,
        host: "h".into(),
        port: 1,
    }])
    .unwrap()
}

fn encoded(entry: &Entry) -> BytesMut {
    let voters = voters();
    let cx = EncodeContext {
        leader_id: 1,
        voters: &voters,
        now_ms: 0,
    };
    let mut out = BytesMut::new();
    encode_entry(&mut out, entry, &cx).unwrap();
    out
}

#[test]
fn every_kind_of_entry_round_trips() {
    let entries = [
        Entry::new_blank(LogId::new_term_index(3, 7)),
        Entry::new_normal(
            LogId::new_term_index(3, 8),
            MetadataRecord(Bytes::from_static(b"r")),
        ),
        Entry::new_membership(LogId::new_term_index(0, 0), voters().membership()),
    ];
    for entry in entries {
        let decoded = decode_entries(encoded(&entry).freeze()).unwrap();
        assert_eq!(decoded, vec![entry]);
    }
}

#[test]
fn damaged_or_foreign_batches_are_errors_not_panics() {
    let entry = Entry::new_blank(LogId::new_term_index(1, 0));
    let bytes = encoded(&entry);
    for cut in [1, 20, bytes.len() - 1] {
        assert!(decode_entries(bytes.clone().freeze().slice(..cut)).is_err());
    }
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    assert!(decode_entries(flipped.freeze()).is_err());
    // A transaction marker (control type 0) is no Raft entry.
    let record = Record {
        transactional: false,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: 1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: Some(control_key(0)),
        value: Some(Bytes::new()),
        headers: Default::default(),
    };
    let mut out = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, [&record], &options).unwrap();
    let error = decode_entries(out.freeze()).unwrap_err().to_string();
    assert!(error.contains("not a Raft entry"), "{error}");
}
