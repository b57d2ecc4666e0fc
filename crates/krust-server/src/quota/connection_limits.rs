//! Kafka's ConnectionQuotas: open connections counted per client address against
//! max.connections, max.connections.per.ip and max.connections.per.ip.overrides, and the rate
//! connections are created at against each ip's connection_creation_rate quota (KIP-612) and
//! the broker-wide max.connection.creation.rate. Every limit can change while the broker runs.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::quota::rate::{QuotaWindow, Rate};

/// The connection limits in force.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionLimits {
    /// max.connections
    pub max_connections: usize,
    /// max.connections.per.ip
    pub max_per_ip: usize,
    /// max.connections.per.ip.overrides, by address
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// max.connection.creation.rate (connections per second, broker-wide)
    pub max_creation_rate: f64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: i32::MAX as usize,
            max_per_ip: i32::MAX as usize,
            per_ip_overrides: HashMap::new(),
            max_creation_rate: f64::from(i32::MAX),
        }
    }
}

/// Why a new connection is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionThrottle {
    /// Its ip is over its connection_creation_rate: it is closed after this many ms.
    Ip(i64),
    /// The broker is over max.connection.creation.rate: accepting waits this many ms.
    Broker(i64),
}

/// The connection creation rates: per ip against its quota, and broker-wide.
struct CreationRates {
    /// connection_creation_rate by ip (None: the default ip entity).
    ip_quotas: HashMap<Option<IpAddr>, f64>,
    ip_rates: HashMap<IpAddr, Rate>,
    broker: Rate,
}

/// Counts open connections per client address and in total.
pub struct ConnectionCounter {
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    limits: RwLock<ConnectionLimits>,
    window: QuotaWindow,
    rates: Mutex<CreationRates>,
}

impl Default for ConnectionCounter {
    fn default() -> Self {
        ConnectionCounter::new(ConnectionLimits::default(), QuotaWindow::default())
    }
}

/// Releases its connection slot when the connection ends.
pub struct ConnectionSlot {
    counter: Arc<ConnectionCounter>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut per_ip = self.counter.per_ip.lock();
        if let Some(count) = per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionCounter {
    pub fn new(limits: ConnectionLimits, window: QuotaWindow) -> Self {
        ConnectionCounter {
            per_ip: Mutex::default(),
            limits: RwLock::new(limits),
            window,
            rates: Mutex::new(CreationRates {
                ip_quotas: HashMap::new(),
                ip_rates: HashMap::new(),
                broker: Rate::new(window),
            }),
        }
    }

    /// Installs new limits; connections already open are kept, as in Kafka.
    pub fn set_limits(&self, limits: ConnectionLimits) {
        *self.limits.write() = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> ConnectionLimits {
        self.limits.read().clone()
    }

    /// Installs the connection_creation_rate quotas of ip entities (None: the default).
    pub fn set_ip_connection_rates(&self, quotas: HashMap<Option<IpAddr>, f64>) {
        let mut rates = self.rates.lock();
        rates.ip_quotas = quotas;
        rates.ip_rates.clear();
    }

    /// Takes a slot for a connection from `ip`, or `None` if a limit is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnectionSlot> {
        let limits = self.limits.read();
        let max_from_ip = limits
            .per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(limits.max_per_ip);
        let mut per_ip = self.per_ip.lock();
        let total: usize = per_ip.values().sum();
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= max_from_ip || total >= limits.max_connections {
            return None;
        }
        per_ip.insert(ip, from_ip + 1);
        Some(ConnectionSlot {
            counter: self.clone(),
            ip,
        })
    }

    /// Records a new connection from `ip` at `now_ms`: whether it must wait (the broker's
    /// rate) or be closed (its ip's rate), as Kafka's ConnectionQuotas decides. A connection
    /// closed for its ip's rate is not counted, so a client retrying later is not punished
    /// twice. Both throttle times are capped at one quota window.
    pub fn record_connection(&self, ip: IpAddr, now_ms: i64) -> Option<ConnectionThrottle> {
        let max_creation_rate = self.limits.read().max_creation_rate;
        let max_throttle = self.window.window_ms;
        let mut rates = self.rates.lock();
        let rates = &mut *rates;
        let ip_quota = rates
            .ip_quotas
            .get(&Some(ip))
            .or_else(|| rates.ip_quotas.get(&None))
            .copied();
        if let Some(quota) = ip_quota {
            let window = self.window;
            let rate = rates
                .ip_rates
                .entry(ip)
                .or_insert_with(|| Rate::new(window));
            let throttle = rate.record_and_throttle_ms(1.0, now_ms, quota);
            if throttle > 0 {
                rate.record(-1.0, now_ms);
                return Some(ConnectionThrottle::Ip(throttle.min(max_throttle)));
            }
        }
        let throttle = rates
            .broker
            .record_and_throttle_ms(1.0, now_ms, max_creation_rate);
        (throttle > 0).then(|| ConnectionThrottle::Broker(throttle.min(max_throttle)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    fn counter(max_per_ip: usize, max_connections: usize) -> Arc<ConnectionCounter> {
        let limits = ConnectionLimits {
            max_per_ip,
            max_connections,
            ..ConnectionLimits::default()
        };
        Arc::new(ConnectionCounter::new(limits, QuotaWindow::default()))
    }

    #[test]
    fn max_connections_per_ip_and_in_total_are_enforced_and_released() {
        let counter = counter(2, 3);
        let first = counter.try_acquire(A).unwrap();
        let _second = counter.try_acquire(A).unwrap();
        assert!(counter.try_acquire(A).is_none(), "max.connections.per.ip");
        let _third = counter.try_acquire(B).unwrap();
        assert!(counter.try_acquire(B).is_none(), "max.connections");
        drop(first);
        assert!(counter.try_acquire(B).is_some());
    }

    #[test]
    fn per_ip_overrides_win_and_limits_change_while_running() {
        let counter = counter(1, 100);
        let _a = counter.try_acquire(A).unwrap();
        assert!(counter.try_acquire(A).is_none());
        counter.set_limits(ConnectionLimits {
            max_per_ip: 0,
            per_ip_overrides: HashMap::from([(A, 3)]),
            ..counter.limits()
        });
        let _b = counter.try_acquire(A).unwrap();
        let _c = counter.try_acquire(A).unwrap();
        assert!(counter.try_acquire(A).is_none(), "the override of A");
        assert!(
            counter.try_acquire(B).is_none(),
            "max.connections.per.ip=0 elsewhere"
        );
    }

    #[test]
    fn an_ip_over_its_connection_creation_rate_is_throttled_others_are_not() {
        let counter = counter(100, 100);
        counter.set_ip_connection_rates(HashMap::from([(Some(A), 1.0)]));
        // 10 connections are allowed within the first 10 s windows (1/s).
        for _ in 0..10 {
            assert_eq!(counter.record_connection(A, 0), None);
        }
        assert!(matches!(
            counter.record_connection(A, 0),
            Some(ConnectionThrottle::Ip(ms)) if ms > 0 && ms <= 1000
        ));
        assert_eq!(counter.record_connection(B, 0), None);
    }

    #[test]
    fn the_broker_wide_creation_rate_makes_accepting_wait() {
        let counter = counter(100, 100);
        counter.set_limits(ConnectionLimits {
            max_creation_rate: 2.0,
            ..counter.limits()
        });
        for _ in 0..20 {
            assert_eq!(counter.record_connection(A, 0), None);
        }
        assert!(matches!(
            counter.record_connection(B, 0),
            Some(ConnectionThrottle::Broker(_))
        ));
    }
}
