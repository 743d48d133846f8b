//! The pure limiters of a resource: a token bucket refilled at the granted
//! rate (rate resources) and a gauge of permits in flight (gauge
//! resources). Driven by the `now` they are given.
//!
//! Must not: read a clock, lock, or know the resource that holds them.

use tokio::time::{Duration, Instant};

/// Longest single sleep of a waiter; it re-checks afterwards.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// A token bucket refilled at the granted rate, holding at most
/// `burst_time` × rate tokens (at least one). It starts empty.
#[derive(Debug)]
pub struct Bucket {
    pub(crate) rate: f64,
    pub(crate) burst: f64,
    pub(crate) tokens: f64,
    pub(crate) last: Instant,
    pub(crate) burst_time: f64,
    pub(crate) min_burst: f64,
}

impl Bucket {
    /// An empty bucket with no rate; it will hold `burst_time` at its rate,
    /// and at least one permit.
    pub fn new(now: Instant, burst_time: Duration) -> Self {
        Bucket {
            rate: 0.0,
            burst: 0.0,
            tokens: 0.0,
            last: now,
            burst_time: burst_time.as_secs_f64(),
            min_burst: 1.0,
        }
    }

    /// Holds at least `permits` whatever the rate. A bucket that holds one
    /// permit loses, under demand above its rate, the time between that
    /// permit being earned and the next request arriving, every time:
    /// with requests at irregular gaps of 17 ms on average it admitted 89 %
    /// of its rate. With two, a permit earned meanwhile is kept.
    pub fn with_min_burst(mut self, permits: f64) -> Self {
        self.min_burst = permits.max(1.0);
        self
    }

    /// Adds the tokens earned since the last refill.
    pub fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + self.rate * dt).min(self.burst);
    }

    /// A new rate applies at once; tokens never exceed the new burst size.
    pub fn set_rate(&mut self, rate: f64, now: Instant) {
        self.refill(now);
        self.rate = rate;
        self.burst = if rate > 0.0 {
            (self.burst_time * rate).max(self.min_burst)
        } else {
            0.0
        };
        self.tokens = self.tokens.min(self.burst);
    }

    /// The rate (tokens per second).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The most tokens it holds.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Fills it to its burst (a bucket that has just received its first
    /// rate, so that its first request is not refused for want of time).
    pub fn fill(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.max(self.burst);
    }

    /// Tokens there now (negative while in debt).
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.tokens
    }

    /// How long until the bucket is full again (zero when it is, or has no
    /// rate).
    pub fn until_full(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64((self.burst - self.tokens).max(0.0) / self.rate)
            .unwrap_or(MAX_WAIT)
    }

    /// Takes `n` permits if available. A request larger than the burst is
    /// allowed once a full burst is there, leaving the bucket in debt, so the
    /// long-run rate holds. Otherwise returns how long until it could.
    pub fn try_take(&mut self, n: f64, now: Instant) -> Result<(), Option<Duration>> {
        self.refill(now);
        let need = if self.burst > 0.0 {
            n.min(self.burst)
        } else {
            n
        };
        if self.tokens >= need && self.rate > 0.0 {
            self.tokens -= n;
            return Ok(());
        }
        if self.rate <= 0.0 {
            return Err(None);
        }
        // A tiny rate or a deep debt can ask for a wait longer than Duration
        // holds; waiters are woken on any capacity change anyway.
        let secs = (need - self.tokens) / self.rate;
        Err(Some(
            Duration::try_from_secs_f64(secs)
                .unwrap_or(MAX_WAIT)
                .min(MAX_WAIT),
        ))
    }
}

/// A gauge of permits in flight.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    pub capacity: u64,
    pub in_flight: u64,
    pub waiting: u64,
}
