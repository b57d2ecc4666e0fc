//! The wall clock the core stamps appends and schedules flushes with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (Kafka's `Time.milliseconds()`); 0 if the clock is set
/// before 1970.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
