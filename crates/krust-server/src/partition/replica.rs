//! `ReplicaState`: what a leader knows of one follower (Kafka's `Replica`): how far it has
//! fetched, and when it last was caught up with the leader, which decides whether it stays
//! in the ISR (`replica.lag.time.max.ms`).

/// Kafka's `UnifiedLog.UnknownOffset`.
pub const UNKNOWN_OFFSET: i64 = -1;

/// One follower's fetch state, as its leader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// The offset the follower fetched from last: everything below it is in its log.
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    /// The leader's log end offset when the follower last fetched.
    pub last_fetch_leader_log_end_offset: i64,
    pub last_fetch_time_ms: i64,
    /// The last time the follower had everything the leader had (Kafka's
    /// `lastCaughtUpTimeMs`).
    pub last_caught_up_time_ms: i64,
}

impl ReplicaState {
    /// A follower this leader has heard nothing from yet. One in the ISR counts as caught up
    /// now, one outside it as never, so an out-of-sync follower does not hold the high
    /// watermark back (Kafka's `resetReplicaState` for a new leader).
    pub fn unknown(now_ms: i64, in_sync: bool) -> Self {
        ReplicaState {
            log_end_offset: UNKNOWN_OFFSET,
            log_start_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: UNKNOWN_OFFSET,
            last_fetch_time_ms: 0,
            last_caught_up_time_ms: if in_sync { now_ms } else { 0 },
        }
    }

    /// Kafka's `updateFetchState`: a fetch at `fetch_offset` while the leader's log ended at
    /// `leader_end_offset`. The follower was caught up now if it fetched from the leader's
    /// end, or at its previous fetch if it now fetches from where the leader's log then
    /// ended.
    pub fn update_fetch_state(
        &mut self,
        fetch_offset: i64,
        log_start_offset: i64,
        fetch_time_ms: i64,
        leader_end_offset: i64,
    ) {
        if fetch_offset >= leader_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(fetch_time_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = fetch_offset;
        self.log_start_offset = log_start_offset;
        self.last_fetch_leader_log_end_offset = leader_end_offset;
        self.last_fetch_time_ms = fetch_time_ms;
    }

    /// Kafka's `isCaughtUp`: at the leader's end, or caught up within `max_lag_ms`.
    pub fn is_caught_up(&self, leader_end_offset: i64, now_ms: i64, max_lag_ms: i64) -> bool {
        self.log_end_offset == leader_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= max_lag_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_caught_up_at_its_last_fetch_that_reached_the_leaders_end_then() {
        let mut replica = ReplicaState::unknown(1_000, false);
        assert!(!replica.is_caught_up(10, 1_000, 500));
        // Fetches from 4 while the leader ends at 10: not caught up.
        replica.update_fetch_state(4, 0, 2_000, 10);
        assert_eq!(replica.last_caught_up_time_ms, 0);
        // Fetches from 10 (where the leader then ended) while the leader is at 12: it was
        // caught up at its previous fetch.
        replica.update_fetch_state(10, 0, 3_000, 12);
        assert_eq!(replica.last_caught_up_time_ms, 2_000);
        assert!(replica.is_caught_up(12, 2_400, 500));
        assert!(!replica.is_caught_up(13, 2_600, 500));
        assert!(replica.is_caught_up(10, 9_000, 500), "at the leader's end");
        replica.update_fetch_state(12, 0, 4_000, 12);
        assert_eq!(replica.last_caught_up_time_ms, 4_000);
    }

    #[test]
    fn a_new_leader_counts_its_isr_as_caught_up_now() {
        assert_eq!(ReplicaState::unknown(7, true).last_caught_up_time_ms, 7);
        assert_eq!(ReplicaState::unknown(7, false).last_caught_up_time_ms, 0);
    }
}
