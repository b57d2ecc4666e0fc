use std::collections::{HashMap, HashSet};

use super::*;

fn configs(leader: &str, follower: &str) -> HashMap<String, String> {
    HashMap::from([
        (LEADER_THROTTLED_REPLICAS.to_string(), leader.to_string()),
        (
            FOLLOWER_THROTTLED_REPLICAS.to_string(),
            follower.to_string(),
        ),
    ])
}

#[test]
fn a_broker_takes_the_entries_naming_itself_or_the_wildcard() {
    assert_eq!(throttled_partitions("*", 1), Some(ThrottledReplicas::All));
    assert_eq!(
        throttled_partitions("0:1, 1:2,2:1", 1),
        Some(ThrottledReplicas::Partitions(HashSet::from([0, 2])))
    );
    assert_eq!(throttled_partitions("0:2,1:3", 1), None);
    assert_eq!(throttled_partitions("", 1), None);
}

#[test]
fn topic_configs_mark_leader_and_follower_partitions_and_deletion_clears_them() {
    let quotas = ReplicationQuotas::default();
    quotas.update_topic(1, "orders", &configs("0:1,1:2", "1:1"));
    assert!(quotas.leader.is_throttled("orders", 0));
    assert!(!quotas.leader.is_throttled("orders", 1));
    assert!(quotas.follower.is_throttled("orders", 1));
    assert!(!quotas.follower.is_throttled("audit", 1));
    quotas.update_topic(1, "orders", &HashMap::new());
    assert!(!quotas.leader.is_throttled("orders", 0));
    quotas.update_topic(1, "audit", &configs("*", "*"));
    quotas.retain_topics(&HashSet::from(["orders"]));
    assert!(!quotas.follower.is_throttled("audit", 7));
    quotas.update_topic(1, "audit", &configs("*", "*"));
    quotas.remove_topic("audit");
    assert!(!quotas.leader.is_throttled("audit", 7));
}

#[test]
fn without_a_bound_nothing_is_ever_throttled() {
    let quota = ReplicationQuota::new(QuotaWindow::default());
    quota.set_throttled("orders", Some(ThrottledReplicas::All));
    quota.record(usize::MAX / 2, 0);
    assert!(!quota.should_throttle("orders", 0, false, 1));
}

#[test]
fn an_out_of_sync_throttled_replica_waits_while_the_rate_is_over_the_bound() {
    let quota = ReplicationQuota::new(QuotaWindow::default());
    quota.set_throttled(
        "orders",
        Some(ThrottledReplicas::Partitions(HashSet::from([0]))),
    );
    quota.set_bound(1000);
    // Within the bound: the first fetch goes ahead.
    assert!(!quota.should_throttle("orders", 0, false, 0));
    quota.record(5000, 0);
    // 5000 bytes over at least one second: over 1000/s.
    assert!(quota.should_throttle("orders", 0, false, 500));
    // Replicas in sync, and partitions not throttled, are never held back.
    assert!(!quota.should_throttle("orders", 0, true, 500));
    assert!(!quota.should_throttle("orders", 1, false, 500));
    // Measured since the oldest sample: 5000 bytes over 5 s is the bound itself.
    assert!(quota.should_throttle("orders", 0, false, 4999));
    assert!(!quota.should_throttle("orders", 0, false, 5000));
    // A raised bound applies at once.
    quota.record(5000, 5000);
    assert!(quota.should_throttle("orders", 0, false, 5000));
    quota.set_bound(1_000_000);
    assert!(!quota.should_throttle("orders", 0, false, 5000));
}

#[test]
fn samples_older_than_the_whole_window_no_longer_count() {
    let quota = ReplicationQuota::new(QuotaWindow::default());
    quota.set_throttled("orders", Some(ThrottledReplicas::All));
    quota.set_bound(1);
    quota.record(1 << 20, 0);
    assert!(quota.is_quota_exceeded(10_999));
    assert!(!quota.is_quota_exceeded(11_000));
}
