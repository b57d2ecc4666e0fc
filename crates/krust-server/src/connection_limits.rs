//! max.connections and max.connections.per.ip: open connections counted per client address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// Counts open connections per client address and in total.
#[derive(Default)]
pub struct ConnectionCounter {
    per_ip: Mutex<HashMap<IpAddr, usize>>,
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
    /// Takes a slot for a connection from `ip`, or `None` if a limit is reached.
    pub fn try_acquire(
        self: &Arc<Self>,
        ip: IpAddr,
        max_per_ip: usize,
        max_total: usize,
    ) -> Option<ConnectionSlot> {
        let mut per_ip = self.per_ip.lock();
        let total: usize = per_ip.values().sum();
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= max_per_ip || total >= max_total {
            return None;
        }
        per_ip.insert(ip, from_ip + 1);
        Some(ConnectionSlot {
            counter: self.clone(),
            ip,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_connections_per_ip_and_in_total_are_enforced_and_released() {
        let counter = Arc::new(ConnectionCounter::default());
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = counter.try_acquire(a, 2, 3).unwrap();
        let _second = counter.try_acquire(a, 2, 3).unwrap();
        assert!(
            counter.try_acquire(a, 2, 3).is_none(),
            "max.connections.per.ip"
        );
        let _third = counter.try_acquire(b, 2, 3).unwrap();
        assert!(counter.try_acquire(b, 2, 3).is_none(), "max.connections");
        drop(first);
        assert!(counter.try_acquire(b, 2, 3).is_some());
    }
}
