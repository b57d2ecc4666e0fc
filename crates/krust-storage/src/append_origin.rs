//! `AppendOrigin`: who appends to a log, which decides what the append may hold (Kafka's
//! `AppendOrigin`).

/// Who appends a record set to a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's Produce request: the leader assigns offsets; control batches are refused.
    Client,
    /// A coordinator inside the broker (the metadata log, group and, later, transaction
    /// coordinators): the leader assigns offsets; control batches (transaction markers) are
    /// allowed.
    Coordinator,
    /// A follower copying its leader's batches: the leader's offsets are kept.
    Replication,
}

impl AppendOrigin {
    /// Only a coordinator writes control batches (KIP-98's markers); a client never may.
    pub fn may_write_control_batches(self) -> bool {
        !matches!(self, AppendOrigin::Client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::TestBatch;
    use crate::config::LogConfig;
    use crate::error::AppendError;
    use crate::log_tests::{open_log, NOW};

    fn control_batch() -> Vec<u8> {
        let mut batch = TestBatch::simple(1, NOW);
        batch.attributes = 0x20;
        batch.encode()
    }

    #[test]
    fn a_coordinator_appends_control_batches_a_client_may_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), LogConfig::default());
        let refused = log.append_as_leader(&control_batch(), 0, NOW).unwrap_err();
        assert_eq!(refused.kafka_error_code(), 87);
        let info = log
            .append_as_leader_from(AppendOrigin::Coordinator, &control_batch(), 0, NOW)
            .unwrap();
        assert_eq!((info.first_offset, log.log_end_offset()), (0, 1));
    }

    #[test]
    fn replicated_batches_are_not_appended_as_leader() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path(), LogConfig::default());
        let batch = TestBatch::simple(1, NOW).encode();
        let error = log
            .append_as_leader_from(AppendOrigin::Replication, &batch, 0, NOW)
            .unwrap_err();
        assert!(matches!(error, AppendError::ReplicationAsLeader));
        assert_eq!(log.log_end_offset(), 0);
    }
}
