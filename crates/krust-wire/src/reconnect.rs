//! A node's connection that reopens itself: after a failure the next request connects
//! again, waiting out an exponential backoff first (Kafka's `reconnect.backoff.ms` and
//! `reconnect.backoff.max.ms`, KIP-144), so a node that is down is not hammered.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use tokio::time::Instant;

use crate::config::ConnectionConfig;
use crate::connection::Connection;
use crate::error::WireError;

/// Exponential backoff between connection attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The pause after the first failure (`reconnect.backoff.ms`).
    pub initial: Duration,
    /// The longest pause (`reconnect.backoff.max.ms`).
    pub max: Duration,
}

impl Default for Backoff {
    /// Kafka's client defaults: 50 ms doubling up to 1 s.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(1),
        }
    }
}

impl Backoff {
    /// The pause after `failures` failures in a row (none after none).
    pub fn delay(&self, failures: u32) -> Duration {
        match failures {
            0 => Duration::ZERO,
            n => self
                .initial
                .saturating_mul(1u32 << (n - 1).min(20))
                .min(self.max),
        }
    }
}

#[derive(Default)]
struct State {
    connection: Option<Arc<Connection>>,
    failures: u32,
    last_failure: Option<Instant>,
}

/// The connection to one node, reopened after failures.
pub struct Reconnecting {
    address: String,
    config: Arc<ConnectionConfig>,
    backoff: Backoff,
    state: tokio::sync::Mutex<State>,
}

impl Reconnecting {
    /// Connections to `address`, opened when first needed.
    pub fn new(
        address: impl Into<String>,
        config: Arc<ConnectionConfig>,
        backoff: Backoff,
    ) -> Self {
        Self {
            address: address.into(),
            config,
            backoff,
            state: tokio::sync::Mutex::default(),
        }
    }

    /// The node's `host:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The open connection, or a new one once the backoff after the last failure has passed.
    pub async fn connection(&self) -> Result<Arc<Connection>, WireError> {
        let mut state = self.state.lock().await;
        if let Some(connection) = state.connection.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(connection));
        }
        state.connection = None;
        if let Some(last) = state.last_failure {
            tokio::time::sleep_until(last + self.backoff.delay(state.failures)).await;
        }
        match Connection::connect(&self.address, Arc::clone(&self.config)).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                state.connection = Some(Arc::clone(&connection));
                state.failures = 0;
                state.last_failure = None;
                Ok(connection)
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                state.last_failure = Some(Instant::now());
                Err(error)
            }
        }
    }

    /// Sends `request` at `version` once, on the open connection or a new one.
    pub async fn send<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, WireError> {
        let connection = self.connection().await?;
        let answered = connection.send(request, version).await;
        if answered.is_err() && connection.is_closed() {
            let mut state = self.state.lock().await;
            if state
                .connection
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &connection))
            {
                state.connection = None;
                state.failures = 1;
                state.last_failure = Some(Instant::now());
            }
        }
        answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_max() {
        let backoff = Backoff::default();
        let ms = |n| backoff.delay(n).as_millis();
        assert_eq!(
            [ms(0), ms(1), ms(2), ms(3), ms(6), ms(60)],
            [0, 50, 100, 200, 1000, 1000]
        );
    }
}
