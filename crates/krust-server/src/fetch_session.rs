//! Incremental fetch sessions (KIP-227): the broker remembers a client's partition set so that
//! later fetches send and receive only what changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

/// Epoch -1 closes a session (or asks for a sessionless fetch); epoch 0 opens one.
const FINAL_EPOCH: i32 = -1;
const INITIAL_EPOCH: i32 = 0;
/// Kafka's max.incremental.fetch.session.cache.slots default.
const MAX_SESSIONS: usize = 1000;
/// Sessions unused this long may be evicted to make room.
const EVICTION_AGE: Duration = Duration::from_secs(120);

/// What the broker remembers of one partition in a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// The leader epoch the client believes current (-1: unknown), checked per KIP-320.
    pub current_leader_epoch: i32,
    /// A follower's: the epoch of its last fetched batch (-1: none), KIP-320.
    pub last_fetched_epoch: i32,
    /// A follower's log start offset.
    pub log_start_offset: i64,
    /// (high watermark, log start offset) last sent, to tell whether the client must hear again.
    pub last_sent: Option<(i64, i64)>,
}

struct FetchSession {
    next_epoch: i32,
    partitions: Vec<SessionPartition>,
    last_used: Instant,
}

/// How the request relates to a session, once resolved.
pub enum SessionContext {
    /// No session: answer every requested partition.
    Sessionless,
    /// A new or continued session: answer with `session_id`; `incremental` omits unchanged partitions.
    Session {
        session_id: i32,
        partitions: Vec<SessionPartition>,
        incremental: bool,
    },
    /// A top-level error code.
    Error(i16),
}

#[derive(Default)]
pub struct FetchSessionCache {
    sessions: Mutex<HashMap<i32, FetchSession>>,
    last_id: AtomicI32,
}

impl FetchSessionCache {
    /// Resolves the request's session fields against the cache, updating the session with the
    /// requested partitions (`requested`) and forgotten ones.
    pub fn resolve(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<SessionPartition>,
        forgotten: &[(String, i32)],
    ) -> SessionContext {
        let mut sessions = self.sessions.lock();
        if epoch == FINAL_EPOCH {
            sessions.remove(&session_id);
            return SessionContext::Sessionless;
        }
        if epoch == INITIAL_EPOCH {
            sessions.remove(&session_id);
            if !make_room(&mut sessions) {
                return SessionContext::Sessionless;
            }
            let id = self.new_id(&sessions);
            sessions.insert(
                id,
                FetchSession {
                    next_epoch: 1,
                    partitions: requested.clone(),
                    last_used: Instant::now(),
                },
            );
            return SessionContext::Session {
                session_id: id,
                partitions: requested,
                incremental: false,
            };
        }
        let Some(session) = sessions.get_mut(&session_id) else {
            return SessionContext::Error(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.next_epoch != epoch {
            return SessionContext::Error(ResponseError::InvalidFetchSessionEpoch.code());
        }
        session.next_epoch = session.next_epoch.wrapping_add(1).max(1);
        session.last_used = Instant::now();
        session.partitions.retain(|p| {
            !forgotten
                .iter()
                .any(|(t, i)| *t == p.topic && *i == p.partition)
        });
        for update in requested {
            match session
                .partitions
                .iter_mut()
                .find(|p| p.topic == update.topic && p.partition == update.partition)
            {
                Some(existing) => {
                    existing.fetch_offset = update.fetch_offset;
                    existing.max_bytes = update.max_bytes;
                    existing.current_leader_epoch = update.current_leader_epoch;
                    existing.last_fetched_epoch = update.last_fetched_epoch;
                    existing.log_start_offset = update.log_start_offset;
                    // A re-sent partition is answered even if nothing else changed.
                    existing.last_sent = None;
                }
                None => session.partitions.push(update),
            }
        }
        SessionContext::Session {
            session_id,
            partitions: session.partitions.clone(),
            incremental: true,
        }
    }

    /// Records what was sent for each partition of a session.
    pub fn record_sent(&self, session_id: i32, sent: &[(String, i32, i64, i64)]) {
        if let Some(session) = self.sessions.lock().get_mut(&session_id) {
            for (topic, partition, hw, log_start) in sent {
                if let Some(p) = session
                    .partitions
                    .iter_mut()
                    .find(|p| p.topic == *topic && p.partition == *partition)
                {
                    p.last_sent = Some((*hw, *log_start));
                }
            }
        }
    }

    fn new_id(&self, sessions: &HashMap<i32, FetchSession>) -> i32 {
        loop {
            let id = self.last_id.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            if id > 0 && !sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

fn make_room(sessions: &mut HashMap<i32, FetchSession>) -> bool {
    if sessions.len() < MAX_SESSIONS {
        return true;
    }
    let oldest = sessions
        .iter()
        .filter(|(_, s)| s.last_used.elapsed() > EVICTION_AGE)
        .min_by_key(|(_, s)| s.last_used)
        .map(|(id, _)| *id);
    match oldest {
        Some(id) => {
            sessions.remove(&id);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, index: i32, offset: i64) -> SessionPartition {
        SessionPartition {
            topic: topic.into(),
            topic_id: Uuid::nil(),
            partition: index,
            fetch_offset: offset,
            max_bytes: 1024,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
            last_sent: None,
        }
    }

    #[test]
    fn a_session_grows_forgets_and_checks_epochs() {
        let cache = FetchSessionCache::default();
        let SessionContext::Session { session_id, .. } =
            cache.resolve(0, 0, vec![partition("a", 0, 0), partition("a", 1, 0)], &[])
        else {
            panic!("a session should be created");
        };
        let SessionContext::Session {
            partitions,
            incremental,
            ..
        } = cache.resolve(
            session_id,
            1,
            vec![partition("b", 0, 5)],
            &[("a".to_string(), 1)],
        )
        else {
            panic!("epoch 1 should continue the session");
        };
        assert!(incremental);
        let names: Vec<_> = partitions
            .iter()
            .map(|p| (p.topic.as_str(), p.partition))
            .collect();
        assert_eq!(names, vec![("a", 0), ("b", 0)]);
        assert!(matches!(
            cache.resolve(session_id, 1, vec![], &[]),
            SessionContext::Error(code) if code == ResponseError::InvalidFetchSessionEpoch.code()
        ));
        assert!(matches!(
            cache.resolve(session_id + 1000, 1, vec![], &[]),
            SessionContext::Error(code) if code == ResponseError::FetchSessionIdNotFound.code()
        ));
        assert!(matches!(
            cache.resolve(session_id, -1, vec![], &[]),
            SessionContext::Sessionless
        ));
        assert!(matches!(
            cache.resolve(session_id, 2, vec![], &[]),
            SessionContext::Error(code) if code == ResponseError::FetchSessionIdNotFound.code()
        ));
    }
}
