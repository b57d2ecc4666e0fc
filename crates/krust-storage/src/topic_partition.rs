//! `TopicPartition` and the `<topic>-<partition>` directory naming of partition logs, with
//! Kafka's `<topic>-<partition>.<id>-future` and `-delete` directories.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;

/// Kafka's longest legal topic name.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// A partition of a topic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition's directory name under a log dir: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name; topics may contain '-', so the partition follows the last one.
    /// Kafka's `-delete`, `-future` and `-stray` directories do not parse and are skipped.
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let partition = partition.parse().ok()?;
        is_valid_topic_name(topic).then(|| Self::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's topic name rule: 1..=249 characters of `[a-zA-Z0-9._-]`, not "." or "..".
pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOPIC_NAME_LENGTH
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

// Kafka's suffixed partition directories (a replica moving between log dirs, `log_dir_move`).

/// Kafka's `FutureDirSuffix`.
pub const FUTURE_DIR_SUFFIX: &str = "-future";
/// Kafka's `DeleteDirSuffix`.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// File names longer than this are refused by common file systems (Kafka's KAFKA-4893 check).
const MAX_DIR_NAME_LENGTH: usize = 255;

/// `<topic>-<partition>.<32 hex digits><suffix>`, Kafka's name of a future or deleted log.
pub fn suffixed_dir_name(tp: &TopicPartition, suffix: &str) -> String {
    format!("{}.{}{}", tp.dir_name(), unique_id(), suffix)
}

/// Whether a future log's directory name for `tp` would be too long for the file system.
pub fn future_dir_name_too_long(tp: &TopicPartition) -> bool {
    tp.dir_name().len() + 1 + 32 + FUTURE_DIR_SUFFIX.len() > MAX_DIR_NAME_LENGTH
}

/// 32 random hex digits, as Kafka's `UUID.randomUUID` without dashes.
fn unique_id() -> String {
    let half = || {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

pub(crate) fn suffixed_dir_partition(name: &str, suffix: &str) -> Option<TopicPartition> {
    let (base, id) = name.strip_suffix(suffix)?.rsplit_once('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    TopicPartition::from_dir_name(base)
}

/// The partition of a `<topic>-<partition>.<id>-future` directory name.
pub(crate) fn future_dir_partition(name: &str) -> Option<TopicPartition> {
    suffixed_dir_partition(name, FUTURE_DIR_SUFFIX)
}

/// Whether `path` is a future log's directory.
pub(crate) fn is_future_dir(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(future_dir_partition)
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_topics_with_dashes() {
        let tp = TopicPartition::new("my-topic-v2", 11);
        assert_eq!(tp.dir_name(), "my-topic-v2-11");
        assert_eq!(TopicPartition::from_dir_name("my-topic-v2-11"), Some(tp));
    }

    #[test]
    fn skips_non_partition_names() {
        for name in [
            "lost+found",
            "topic",
            "topic-",
            "-3",
            "t-1.5b8c-delete",
            "t-0.abc-future",
            "bad name-0",
            "recovery-point-offset-checkpoint",
        ] {
            assert_eq!(TopicPartition::from_dir_name(name), None, "{name}");
        }
    }
}
