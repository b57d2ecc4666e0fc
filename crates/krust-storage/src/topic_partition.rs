//! `TopicPartition` and the `<topic>-<partition>` directory naming of partition logs.

use std::fmt;

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
