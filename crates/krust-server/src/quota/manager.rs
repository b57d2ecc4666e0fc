//! Kafka's ClientQuotaManager: each client (principal, client id) is metered per quota type by
//! the rate of its quota entity, and a request that takes the rate over the quota gets a
//! throttle time (KIP-219). No quota set and no callback: one atomic load per request.
//!
//! The quotas come from the metadata image, or, with `client.quota.callback.class`, from the
//! Python callback: a client the core has no answer for yet is metered without a limit and
//! queued for Python, which answers off the request path (`set_callback_limits`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use super::entities::{ClientQuotaTable, ClientQuotaType, MetricTags, QuotaValues};
use super::rate::{QuotaWindow, Rate};

/// One metered rate and the quota it is held to (None: unlimited).
#[derive(Debug)]
struct Metered {
    rate: Rate,
    limit: Option<f64>,
}

type SharedMetered = Arc<Mutex<Metered>>;

/// The rates one client is metered by, one per quota type.
#[derive(Debug)]
struct ClientRates {
    rates: [SharedMetered; 3],
    /// When the client was last metered, for expiring clients that went away.
    last_used_ms: AtomicI64,
}

/// How long a client's rates are kept after its last request (Kafka's
/// InactiveSensorExpirationTimeSeconds).
pub const INACTIVE_CLIENT_EXPIRY_MS: i64 = 3_600_000;

/// A (principal name, client id) whose quotas the callback is asked for.
pub type ClientKey = (String, String);

#[derive(Default)]
struct Inner {
    table: ClientQuotaTable,
    callback: bool,
    callback_limits: HashMap<ClientKey, QuotaValues>,
    clients: HashMap<String, HashMap<String, Arc<ClientRates>>>,
    rates: HashMap<(ClientQuotaType, MetricTags), SharedMetered>,
}

/// Clients waiting for the callback's answer.
#[derive(Default)]
struct Unresolved {
    queue: Mutex<(Vec<ClientKey>, HashSet<ClientKey>)>,
    arrived: Condvar,
}

/// Meters clients against their quotas.
pub struct ClientQuotaManager {
    window: QuotaWindow,
    enabled: AtomicBool,
    inner: RwLock<Inner>,
    unresolved: Unresolved,
}

impl ClientQuotaManager {
    pub fn new(window: QuotaWindow) -> Self {
        ClientQuotaManager {
            window,
            enabled: AtomicBool::new(false),
            inner: RwLock::default(),
            unresolved: Unresolved::default(),
        }
    }

    /// The sample windows rates are measured over.
    pub fn window(&self) -> QuotaWindow {
        self.window
    }

    /// Whether any client is held to a quota (a quota is set, or a callback decides).
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Installs the metadata image's quotas; rates already measured keep their history.
    pub fn set_table(&self, table: ClientQuotaTable) {
        let mut inner = self.inner.write();
        inner.table = table;
        inner.clients.clear();
        self.enabled.store(
            inner.callback || inner.table.has_client_quotas(),
            Ordering::Relaxed,
        );
    }

    /// The metadata image's quotas.
    pub fn table(&self) -> ClientQuotaTable {
        self.inner.read().table.clone()
    }

    /// From now on the callback decides every client's quotas.
    pub fn use_callback(&self) {
        let mut inner = self.inner.write();
        inner.callback = true;
        inner.clients.clear();
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// The callback's answers: each client's quota per type (None: unlimited).
    pub fn set_callback_limits(&self, limits: Vec<(ClientKey, QuotaValues)>) {
        let mut inner = self.inner.write();
        for (client, values) in limits {
            if let Some(rates) = inner.clients.get(&client.0).and_then(|c| c.get(&client.1)) {
                for (metered, limit) in rates.rates.iter().zip(values) {
                    metered.lock().limit = limit;
                }
            }
            inner.callback_limits.insert(client, values);
        }
    }

    /// The callback's quotas changed (Kafka's quotaResetRequired): every known client is asked
    /// for again; until answered, clients keep their previous quotas.
    pub fn reset_callback_limits(&self) {
        let known: Vec<ClientKey> = self.inner.read().callback_limits.keys().cloned().collect();
        let mut queue = self.unresolved.queue.lock();
        for client in known {
            if queue.1.insert(client.clone()) {
                queue.0.push(client);
            }
        }
        self.unresolved.arrived.notify_all();
    }

    /// Clients the callback has to be asked about, waiting up to `timeout` for one.
    pub fn take_unresolved(&self, timeout: Duration) -> Vec<ClientKey> {
        let mut queue = self.unresolved.queue.lock();
        if queue.0.is_empty() {
            self.unresolved.arrived.wait_for(&mut queue, timeout);
        }
        queue.1.clear();
        std::mem::take(&mut queue.0)
    }

    /// Records `value` for the client and answers its throttle time in ms (0: within its
    /// quota), capped at `max_throttle_ms` when given.
    pub fn record_and_throttle_ms(
        &self,
        quota_type: ClientQuotaType,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
        max_throttle_ms: Option<i64>,
    ) -> i64 {
        if !self.enabled() {
            return 0;
        }
        let client = self.rates_of(user, client_id);
        client.last_used_ms.store(now_ms, Ordering::Relaxed);
        let mut metered = client.rates[quota_type.index()].lock();
        let throttle = match metered.limit {
            Some(limit) => metered.rate.record_and_throttle_ms(value, now_ms, limit),
            None => {
                metered.rate.record(value, now_ms);
                0
            }
        };
        max_throttle_ms.map_or(throttle, |max| throttle.min(max))
    }

    /// Takes back a recorded value (a throttled fetch sends no records).
    pub fn unrecord(
        &self,
        quota_type: ClientQuotaType,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
    ) {
        if self.enabled() {
            let metered = self.rates_of(user, client_id).rates[quota_type.index()].clone();
            metered.lock().rate.record(-value, now_ms);
        }
    }

    /// The most the client may take in one quota window (Kafka's getMaxValueInQuotaWindow),
    /// None when unlimited.
    pub fn max_value_in_window(
        &self,
        quota_type: ClientQuotaType,
        user: &str,
        client_id: &str,
    ) -> Option<f64> {
        if !self.enabled() {
            return None;
        }
        let limit = self.rates_of(user, client_id).rates[quota_type.index()]
            .lock()
            .limit?;
        let window_s = self.window.window_ms as f64 / 1000.0;
        Some(limit * (self.window.samples as f64 - 1.0) * window_s)
    }

    /// Forgets clients not metered since `now_ms - max_idle_ms`, and rates no client uses
    /// any more; a client that comes back starts afresh (and the callback is asked again).
    pub fn expire_inactive(&self, now_ms: i64, max_idle_ms: i64) {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        let mut expired = Vec::new();
        for (user, clients) in inner.clients.iter_mut() {
            clients.retain(|client_id, rates| {
                let active = now_ms - rates.last_used_ms.load(Ordering::Relaxed) < max_idle_ms;
                if !active {
                    expired.push((user.clone(), client_id.clone()));
                }
                active
            });
        }
        inner.clients.retain(|_, clients| !clients.is_empty());
        for client in expired {
            inner.callback_limits.remove(&client);
        }
        // Held only by the map: no client is metered by it any more.
        inner
            .rates
            .retain(|_, metered| Arc::strong_count(metered) > 1);
    }

    fn rates_of(&self, user: &str, client_id: &str) -> Arc<ClientRates> {
        if let Some(rates) = self
            .inner
            .read()
            .clients
            .get(user)
            .and_then(|clients| clients.get(client_id))
        {
            return rates.clone();
        }
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        let key = (user.to_string(), client_id.to_string());
        let callback = inner.callback;
        let answered = inner.callback_limits.get(&key).copied();
        if callback && answered.is_none() {
            let mut queue = self.unresolved.queue.lock();
            if queue.1.insert(key.clone()) {
                queue.0.push(key);
                self.unresolved.arrived.notify_all();
            }
        }
        let rates = ClientQuotaType::ALL.map(|quota_type| {
            let (tags, limit) = if callback {
                let limit = answered.and_then(|values| values[quota_type.index()]);
                (MetricTags::new(user, client_id), limit)
            } else {
                inner.table.resolve(quota_type, user, client_id)
            };
            let window = self.window;
            let metered = inner
                .rates
                .entry((quota_type, tags))
                .or_insert_with(|| {
                    Arc::new(Mutex::new(Metered {
                        rate: Rate::new(window),
                        limit,
                    }))
                })
                .clone();
            metered.lock().limit = limit;
            metered
        });
        let rates = Arc::new(ClientRates {
            rates,
            last_used_ms: AtomicI64::new(crate::clock::now_ms()),
        });
        inner
            .clients
            .entry(user.to_string())
            .or_default()
            .insert(client_id.to_string(), rates.clone());
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_with(
        entity: Vec<(String, Option<String>)>,
        key: &str,
        value: f64,
    ) -> ClientQuotaTable {
        ClientQuotaTable::from_entities(vec![(entity, HashMap::from([(key.to_string(), value)]))])
            .unwrap()
    }

    fn manager() -> ClientQuotaManager {
        ClientQuotaManager::new(QuotaWindow::default())
    }

    #[test]
    fn nothing_is_metered_or_throttled_without_quotas() {
        let quotas = manager();
        let throttle =
            quotas.record_and_throttle_ms(ClientQuotaType::Produce, "u", "c", 1e12, 0, None);
        assert_eq!(throttle, 0);
        assert!(quotas.inner.read().rates.is_empty());
    }

    #[test]
    fn a_client_over_its_quota_is_throttled_and_a_changed_quota_applies_at_once() {
        let quotas = manager();
        let client = vec![("client-id".to_string(), Some("c".to_string()))];
        quotas.set_table(table_with(client.clone(), "producer_byte_rate", 100.0));
        let produce = ClientQuotaType::Produce;
        assert_eq!(
            quotas.record_and_throttle_ms(produce, "u", "c", 500.0, 0, None),
            0
        );
        // 3000 bytes in 10 s: 300/s against 100/s is (300 - 100) / 100 x 10 s.
        let throttle = quotas.record_and_throttle_ms(produce, "u", "c", 2500.0, 0, None);
        assert_eq!(throttle, 20_000);
        assert_eq!(
            quotas.record_and_throttle_ms(produce, "u", "other", 2500.0, 0, None),
            0
        );
        quotas.set_table(table_with(client, "producer_byte_rate", 1000.0));
        assert_eq!(
            quotas.record_and_throttle_ms(produce, "u", "c", 1.0, 0, None),
            0
        );
        assert_eq!(
            quotas.max_value_in_window(produce, "u", "c"),
            Some(1000.0 * 10.0)
        );
    }

    #[test]
    fn clients_that_went_away_are_forgotten() {
        let quotas = manager();
        quotas.set_table(table_with(
            vec![("client-id".to_string(), None)],
            "producer_byte_rate",
            100.0,
        ));
        let produce = ClientQuotaType::Produce;
        let now = crate::clock::now_ms();
        quotas.record_and_throttle_ms(produce, "u", "gone", 10.0, now - 10_000, None);
        quotas.record_and_throttle_ms(produce, "u", "here", 10.0, now, None);
        quotas.expire_inactive(now, 5_000);
        let inner = quotas.inner.read();
        assert_eq!(inner.clients["u"].keys().collect::<Vec<_>>(), vec!["here"]);
        let tags: Vec<&str> = inner
            .rates
            .keys()
            .map(|(_, t)| t.client_id.as_str())
            .collect();
        assert!(!tags.contains(&"gone"));
    }

    #[test]
    fn the_callback_is_asked_once_per_new_client_and_again_after_a_reset() {
        let quotas = manager();
        quotas.use_callback();
        let fetch = ClientQuotaType::Fetch;
        assert_eq!(
            quotas.record_and_throttle_ms(fetch, "u", "c", 1e9, 0, None),
            0
        );
        quotas.record_and_throttle_ms(fetch, "u", "c", 1.0, 0, None);
        let asked = quotas.take_unresolved(Duration::ZERO);
        assert_eq!(asked, vec![("u".to_string(), "c".to_string())]);
        quotas.set_callback_limits(vec![(asked[0].clone(), [None, Some(10.0), None])]);
        assert!(quotas.record_and_throttle_ms(fetch, "u", "c", 1.0, 0, None) > 0);
        assert!(quotas.take_unresolved(Duration::ZERO).is_empty());
        quotas.reset_callback_limits();
        assert_eq!(quotas.take_unresolved(Duration::ZERO), asked);
    }
}
