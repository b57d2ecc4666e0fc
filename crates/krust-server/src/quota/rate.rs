//! Kafka's `Rate` over a `SampledStat`: a value per second measured over `quota.window.num`
//! samples of `quota.window.size.seconds` each, and the throttle time of a violation (KIP-219,
//! Kafka's QuotaUtils.throttleTime).

/// How samples are sized: `samples` windows of `window_ms` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    pub samples: usize,
    pub window_ms: i64,
}

impl QuotaWindow {
    /// `quota.window.num` and `quota.window.size.seconds`.
    pub fn from_config(
        values: &dyn krust_config::ConfigValues,
    ) -> Result<Self, krust_config::ConfigValueError> {
        let seconds: i64 = krust_config::read(values, "quota.window.size.seconds")?;
        Ok(QuotaWindow {
            samples: krust_config::read(values, "quota.window.num")?,
            window_ms: seconds.saturating_mul(1000),
        })
    }
}

impl Default for QuotaWindow {
    /// The config table's defaults.
    fn default() -> Self {
        Self::from_config(&krust_config::NoValues).expect("the table's quota window defaults")
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: i64,
    value: f64,
}

/// A rate of recorded values per second.
#[derive(Debug)]
pub struct Rate {
    window: QuotaWindow,
    samples: Vec<Sample>,
    current: usize,
    /// Kafka's `SimpleRate` (replication quotas): measured since the oldest sample, over at
    /// least one window, rather than at least `samples - 1` windows.
    simple: bool,
}

impl Rate {
    pub fn new(window: QuotaWindow) -> Self {
        Rate {
            window: QuotaWindow {
                samples: window.samples.max(1),
                window_ms: window.window_ms.max(1),
            },
            samples: Vec::new(),
            current: 0,
            simple: false,
        }
    }

    /// Kafka's `SimpleRate`, which its replication quotas measure with.
    pub fn simple(window: QuotaWindow) -> Self {
        Rate {
            simple: true,
            ..Rate::new(window)
        }
    }

    /// Adds `value` at `now_ms` (negative to take back what was recorded).
    pub fn record(&mut self, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
        }
        if now_ms - self.samples[self.current].start_ms >= self.window.window_ms {
            self.current = (self.current + 1) % self.window.samples;
            let fresh = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
            if self.current >= self.samples.len() {
                self.samples.push(fresh);
            } else {
                self.samples[self.current] = fresh;
            }
        }
        self.samples[self.current].value += value;
    }

    /// Samples older than the whole window count for nothing (Kafka's purgeObsoleteSamples).
    fn purge_obsolete(&mut self, now_ms: i64) {
        let expiry = self.window.samples as i64 * self.window.window_ms;
        for sample in &mut self.samples {
            if now_ms - sample.start_ms >= expiry {
                *sample = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The time the rate is measured over: since the oldest sample, but at least
    /// `samples - 1` whole windows, so a new client is not judged on its first burst alone
    /// (a simple rate: at least one window).
    pub fn window_size_ms(&mut self, now_ms: i64) -> i64 {
        self.purge_obsolete(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        if self.simple {
            return elapsed.max(self.window.window_ms);
        }
        let full_windows = elapsed / self.window.window_ms;
        let min_full_windows = self.window.samples as i64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * self.window.window_ms;
        }
        elapsed.max(1)
    }

    /// Recorded values per second at `now_ms`.
    pub fn measure(&mut self, now_ms: i64) -> f64 {
        let window_ms = self.window_size_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window_ms as f64 / 1000.0)
    }

    /// Records `value` and answers how long the client must wait for the rate to come back
    /// to `bound` (0 while within it): (rate - bound) / bound x the window the rate is
    /// measured over.
    pub fn record_and_throttle_ms(&mut self, value: f64, now_ms: i64, bound: f64) -> i64 {
        self.record(value, now_ms);
        let rate = self.measure(now_ms);
        if rate <= bound {
            return 0;
        }
        let window_ms = self.window_size_ms(now_ms) as f64;
        ((rate - bound) / bound * window_ms).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: QuotaWindow = QuotaWindow {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_new_rate_is_measured_over_at_least_the_whole_window_less_one_sample() {
        let mut rate = Rate::new(WINDOW);
        rate.record(1000.0, 0);
        assert_eq!(rate.window_size_ms(500), 10_500);
        assert!((rate.measure(500) - 1000.0 / 10.5).abs() < 1e-9);
    }

    #[test]
    fn the_throttle_time_brings_the_rate_back_to_the_bound() {
        // 400 units in the first second of an 11 x 1 s window are measured over 10 s: 40/s
        // against a bound of 10/s is (40 - 10) / 10 x 10 s = 30 s.
        let mut rate = Rate::new(WINDOW);
        let throttle = rate.record_and_throttle_ms(400.0, 0, 10.0);
        assert_eq!(throttle, 30_000);
        // Once that time has passed without new records, the rate is within the bound.
        assert!(rate.measure(30_000) <= 10.0 + 1e-9);
    }

    #[test]
    fn within_the_bound_nothing_is_throttled() {
        let mut rate = Rate::new(WINDOW);
        for second in 0..30 {
            assert_eq!(rate.record_and_throttle_ms(9.0, second * 1000, 10.0), 0);
        }
    }

    #[test]
    fn a_simple_rate_is_measured_since_its_oldest_sample_over_at_least_one_window() {
        let mut rate = Rate::simple(WINDOW);
        rate.record(1000.0, 0);
        assert_eq!(rate.window_size_ms(500), 1000);
        assert_eq!(rate.measure(500), 1000.0);
        assert_eq!(rate.measure(4000), 250.0);
        assert_eq!(rate.measure(11_000), 0.0);
    }

    #[test]
    fn old_samples_expire_and_negative_records_take_bytes_back() {
        let mut rate = Rate::new(WINDOW);
        rate.record(5000.0, 0);
        assert_eq!(rate.measure(11_000), 0.0);
        rate.record(100.0, 11_000);
        rate.record(-100.0, 11_000);
        assert_eq!(rate.measure(11_500), 0.0);
    }
}
