//! Kafka-compatible log storage.
