use std::path::Path;

use bytes::Bytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krust_storage::{AppendOrigin, LoadParams, Log, LogConfig, TopicPartition};
use openraft::entry::RaftEntry;
use openraft::storage::RaftLogStorage;
use openraft::RaftLogReader;

use super::*;
use crate::log_backend::{KafkaLogBackend, MemLogBackend};
use crate::quorum::{adopt_legacy_log, QuorumError, QuorumSettings};
use crate::voters::Voter;
use crate::MetadataRecord;

fn voters(ids: &[i32]) -> StaticVoters {
    let listed = ids
        .iter()
        .map(|id| Voter {
            id: *id,
            host: "localhost".into(),
            port: 9093,
        })
        .collect();
    StaticVoters::new(listed).unwrap()
}

fn open_metadata_log(dir: &Path) -> krust_storage::SharedLog {
    let log = Log::open(
        &dir.join("__cluster_metadata-0"),
        TopicPartition::new("__cluster_metadata", 0),
        None,
        LogConfig::default(),
        LoadParams::default(),
        0,
    )
    .unwrap();
    Arc::new(Mutex::new(log))
}

fn kafka_store(log: &krust_storage::SharedLog, ids: &[i32]) -> LogStore<KafkaLogBackend> {
    let backend = Arc::new(Mutex::new(KafkaLogBackend::new(Arc::clone(log))));
    LogStore::open(backend, voters(ids)).unwrap()
}

fn normal(term: u64, index: u64, value: &'static str) -> Entry {
    Entry::new_normal(
        LogId::new_term_index(term, index),
        MetadataRecord(Bytes::from_static(value.as_bytes())),
    )
}

#[tokio::test]
async fn entries_are_one_record_batches_whose_epoch_is_the_term_and_offset_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_metadata_log(dir.path());
    let mut store = kafka_store(&log, &[1, 2, 3]);
    store.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
    let entries = vec![
        Entry::new_membership(LogId::new_term_index(0, 0), voters(&[1, 2, 3]).membership()),
        Entry::new_blank(LogId::new_term_index(2, 1)),
        normal(2, 2, "a"),
        normal(2, 3, "b"),
    ];
    store.append_entries(entries.clone()).await.unwrap();
    assert_eq!(store.try_get_log_entries(0..4).await.unwrap(), entries);
    assert_eq!(
        store.try_get_log_entries(2..=2).await.unwrap(),
        entries[2..3]
    );

    let mut bytes = KafkaLogBackend::new(Arc::clone(&log))
        .read(0, 1 << 20)
        .unwrap();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    let shape: Vec<(usize, i64, i32, bool)> = sets
        .iter()
        .map(|set| {
            let r = &set.records[0];
            (
                set.records.len(),
                r.offset,
                r.partition_leader_epoch,
                r.control,
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (1, 0, 0, true),
            (1, 1, 2, true),
            (1, 2, 2, false),
            (1, 3, 2, false)
        ]
    );
    let leader_change = sets[1].records[0].key.clone().unwrap();
    assert_eq!(
        &leader_change[2..4],
        &crate::codec::LEADER_CHANGE.to_be_bytes()
    );
}

#[tokio::test]
async fn a_restart_reads_back_the_vote_and_the_last_log_id() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open_metadata_log(dir.path());
        let mut store = kafka_store(&log, &[1]);
        store.save_vote(&Vote::new(5, 1)).await.unwrap();
        store
            .append_entries(vec![normal(0, 0, "x"), normal(5, 1, "y")])
            .await
            .unwrap();
        log.lock().close().unwrap();
    }
    let log = open_metadata_log(dir.path());
    let mut store = kafka_store(&log, &[1]);
    assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(5, 1)));
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(LogId::new_term_index(5, 1)));
    assert_eq!(state.last_purged_log_id, None);
}

#[tokio::test]
async fn truncation_and_purge_drop_entries_from_either_end() {
    let backend = Arc::new(Mutex::new(MemLogBackend::default()));
    let mut store = LogStore::open(Arc::clone(&backend), voters(&[1])).unwrap();
    let entries: Vec<Entry> = (0..5).map(|i| normal(1, i, "v")).collect();
    store.append_entries(entries.clone()).await.unwrap();
    store
        .truncate_after(Some(LogId::new_term_index(1, 2)))
        .await
        .unwrap();
    assert_eq!(
        store.try_get_log_entries(0..10).await.unwrap(),
        entries[..3]
    );
    store.purge(LogId::new_term_index(1, 0)).await.unwrap();
    assert_eq!(
        store.try_get_log_entries(0..10).await.unwrap(),
        entries[1..3]
    );
    let reopened = LogStore::open(backend, voters(&[1]))
        .unwrap()
        .get_log_state()
        .await
        .unwrap();
    assert_eq!(
        reopened.last_purged_log_id,
        Some(LogId::new_term_index(1, 0))
    );
    assert_eq!(reopened.last_log_id, Some(LogId::new_term_index(1, 2)));
}

#[tokio::test]
async fn the_committed_entries_are_the_metadata_logs_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_metadata_log(dir.path());
    let mut store = kafka_store(&log, &[1]);
    let entries: Vec<Entry> = (0..4).map(|i| normal(1, i, "v")).collect();
    store.append_entries(entries).await.unwrap();
    store
        .save_committed(Some(LogId::new_term_index(1, 2)))
        .await
        .unwrap();
    // Retention moves the log start only up to the high watermark: committed entries.
    assert_eq!(log.lock().high_watermark(), 3);
    store.save_committed(None).await.unwrap();
    assert_eq!(log.lock().high_watermark(), 3);
}

/// The batch single-node krust appended: several records, epoch 0, no membership.
fn legacy_batch(values: &[&'static str]) -> Vec<u8> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(value.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    let mut out = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
    out.to_vec()
}

#[tokio::test]
async fn a_single_node_metadata_log_becomes_its_voters_raft_log_keeping_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_metadata_log(dir.path());
    log.lock()
        .append_as_leader_from(
            AppendOrigin::Coordinator,
            &legacy_batch(&["a", "b", "c"]),
            0,
            0,
        )
        .unwrap();

    let three = kafka_store(&log, &[1, 2, 3]);
    let refused = adopt_legacy_log(&three, &QuorumSettings::new(1, voters(&[1, 2, 3]))).await;
    assert!(matches!(
        refused,
        Err(QuorumError::LegacyLogNeedsSingleVoter { .. })
    ));

    let mut store = kafka_store(&log, &[1]);
    let settings = QuorumSettings::new(1, voters(&[1]));
    adopt_legacy_log(&store, &settings).await.unwrap();
    adopt_legacy_log(&store, &settings).await.unwrap();
    let entries = store.try_get_log_entries(0..10).await.unwrap();
    let expected = vec![
        normal(0, 0, "a"),
        normal(0, 1, "b"),
        normal(0, 2, "c"),
        Entry::new_membership(LogId::new_term_index(0, 3), voters(&[1]).membership()),
    ];
    assert_eq!(entries, expected);
}

#[tokio::test]
async fn a_truncated_suffix_stays_gone_after_a_restart_and_the_log_goes_on_in_the_new_term() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open_metadata_log(dir.path());
        let mut store = kafka_store(&log, &[1, 2, 3]);
        let entries: Vec<Entry> = (0..5).map(|i| normal(1, i, "old")).collect();
        store.append_entries(entries).await.unwrap();
        store
            .truncate_after(Some(LogId::new_term_index(1, 2)))
            .await
            .unwrap();
        store
            .append_entries(vec![normal(3, 3, "new")])
            .await
            .unwrap();
        log.lock().close().unwrap();
    }
    let log = open_metadata_log(dir.path());
    let mut store = kafka_store(&log, &[1, 2, 3]);
    let entries = store.try_get_log_entries(0..10).await.unwrap();
    let expected = vec![
        normal(1, 0, "old"),
        normal(1, 1, "old"),
        normal(1, 2, "old"),
        normal(3, 3, "new"),
    ];
    assert_eq!(entries, expected);
    assert_eq!(log.lock().latest_epoch(), Some(3));
}

#[tokio::test]
async fn a_membership_entry_naming_other_voters_is_refused_naming_the_key() {
    let backend = Arc::new(Mutex::new(MemLogBackend::default()));
    let store = LogStore::open(backend, voters(&[1, 2, 3])).unwrap();
    let other = Entry::new_membership(LogId::new_term_index(0, 0), voters(&[1, 2]).membership());
    let error = store.append_entries(vec![other]).await.unwrap_err();
    assert!(
        error.to_string().contains("controller.quorum.voters"),
        "{error}"
    );
    assert_eq!(store.last_entry().await.unwrap(), None);
}
