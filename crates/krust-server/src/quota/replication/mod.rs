//! Replication quotas (KIP-73, Kafka's `ReplicationQuotaManager`): a leader stops sending,
//! and a follower stops asking for, the records of throttled replicas that are not in sync
//! while the broker's replication byte rate is over `leader.replication.throttled.rate` /
//! `follower.replication.throttled.rate`.
//!
//! Which replicas are throttled comes from the topic configs
//! `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`
//! (`*`, or `partition:broker,...` of which a broker takes the entries naming itself).
//! Replicas in sync are never throttled, so a throttle cannot shrink the ISR.

use std::collections::{HashMap, HashSet};

use parking_lot::{Mutex, RwLock};

use crate::quota::rate::{QuotaWindow, Rate};

pub const LEADER_THROTTLED_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_THROTTLED_REPLICAS: &str = "follower.replication.throttled.replicas";

/// The partitions of one topic a quota throttles on this broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThrottledReplicas {
    All,
    Partitions(HashSet<i32>),
}

/// Kafka's `parseThrottledPartitions`: the partitions of `value` (a throttled-replicas
/// config, validated before it was stored) whose broker is `node_id`; `None` when there are
/// none, so the topic is not throttled here.
pub fn throttled_partitions(value: &str, node_id: i32) -> Option<ThrottledReplicas> {
    let value = value.trim();
    if value == "*" {
        return Some(ThrottledReplicas::All);
    }
    let partitions: HashSet<i32> = value
        .split(',')
        .filter_map(|entry| {
            let (partition, broker) = entry.trim().split_once(':')?;
            let broker: i32 = broker.trim().parse().ok()?;
            (broker == node_id).then(|| partition.trim().parse().ok())?
        })
        .collect();
    (!partitions.is_empty()).then_some(ThrottledReplicas::Partitions(partitions))
}

/// One replication quota: the byte rate of throttled partitions against its bound.
#[derive(Debug)]
pub struct ReplicationQuota {
    meter: Mutex<Meter>,
    throttled: RwLock<HashMap<String, ThrottledReplicas>>,
}

#[derive(Debug)]
struct Meter {
    /// Bytes per second; Kafka's default is Long.MAX_VALUE, i.e. no throttle.
    bound: f64,
    rate: Rate,
}

impl ReplicationQuota {
    pub fn new(window: QuotaWindow) -> Self {
        ReplicationQuota {
            meter: Mutex::new(Meter {
                bound: i64::MAX as f64,
                rate: Rate::simple(window),
            }),
            throttled: RwLock::default(),
        }
    }

    /// Sets the bound in bytes per second; it applies from the next check on.
    pub fn set_bound(&self, bytes_per_second: i64) {
        self.meter.lock().bound = bytes_per_second as f64;
    }

    /// Whether `topic`'s `partition` is throttled on this broker.
    pub fn is_throttled(&self, topic: &str, partition: i32) -> bool {
        match self.throttled.read().get(topic) {
            Some(ThrottledReplicas::All) => true,
            Some(ThrottledReplicas::Partitions(set)) => set.contains(&partition),
            None => false,
        }
    }

    /// Whether the rate recorded so far is over the bound at `now_ms`.
    pub fn is_quota_exceeded(&self, now_ms: i64) -> bool {
        let mut meter = self.meter.lock();
        let bound = meter.bound;
        meter.rate.measure(now_ms) > bound
    }

    /// The bytes per second of throttled partitions at `now_ms` (Kafka's `byte-rate` metric).
    pub fn byte_rate(&self, now_ms: i64) -> f64 {
        self.meter.lock().rate.measure(now_ms)
    }

    /// Kafka's `shouldLeaderThrottle` / `shouldFollowerThrottle`: a throttled replica that is
    /// not in sync gets no records while the quota is exceeded.
    pub fn should_throttle(&self, topic: &str, partition: i32, in_sync: bool, now_ms: i64) -> bool {
        !in_sync && self.is_throttled(topic, partition) && self.is_quota_exceeded(now_ms)
    }

    /// Counts `bytes` of throttled partitions, even past the bound (the next check decides).
    pub fn record(&self, bytes: usize, now_ms: i64) {
        if bytes > 0 {
            self.meter.lock().rate.record(bytes as f64, now_ms);
        }
    }

    fn set_throttled(&self, topic: &str, replicas: Option<ThrottledReplicas>) {
        let mut throttled = self.throttled.write();
        match replicas {
            Some(replicas) => throttled.insert(topic.to_string(), replicas),
            None => throttled.remove(topic),
        };
    }
}

/// The leader and follower replication quotas of this broker.
#[derive(Debug)]
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

impl Default for ReplicationQuotas {
    fn default() -> Self {
        ReplicationQuotas {
            leader: ReplicationQuota::new(QuotaWindow::default()),
            follower: ReplicationQuota::new(QuotaWindow::default()),
        }
    }
}

impl ReplicationQuotas {
    /// Takes `topic`'s throttled replicas from its config overrides (Kafka's
    /// TopicConfigHandler), for broker `node_id`.
    pub fn update_topic(&self, node_id: i32, topic: &str, configs: &HashMap<String, String>) {
        let parse = |key: &str| {
            configs
                .get(key)
                .and_then(|value| throttled_partitions(value, node_id))
        };
        self.leader
            .set_throttled(topic, parse(LEADER_THROTTLED_REPLICAS));
        self.follower
            .set_throttled(topic, parse(FOLLOWER_THROTTLED_REPLICAS));
    }

    /// A deleted topic is throttled no more.
    pub fn remove_topic(&self, topic: &str) {
        self.leader.set_throttled(topic, None);
        self.follower.set_throttled(topic, None);
    }

    /// Forgets every topic not in `topics` (a whole metadata image replaced the last).
    pub fn retain_topics(&self, topics: &HashSet<&str>) {
        for quota in [&self.leader, &self.follower] {
            quota
                .throttled
                .write()
                .retain(|topic, _| topics.contains(topic.as_str()));
        }
    }
}

#[cfg(test)]
mod tests;
