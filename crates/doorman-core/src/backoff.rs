//! Exponential backoff with jitter: 100 ms doubling to 30 s by default, each
//! delay drawn uniformly from [d/2, d] so a fleet of clients that lost the
//! same server does not come back in lockstep. Used by the client, the
//! upstream link, the etcd election and config watch, and the simulator.
//!
//! Must not: sleep or read a clock (it only computes delays).

use std::time::Duration;

/// Backoff state. Deterministic for a given seed.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
    rng: u64,
}

impl Backoff {
    /// A backoff from `initial` doubling up to `max`.
    pub fn new(initial: Duration, max: Duration, seed: u64) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
            current: initial,
            rng: seed | 1,
        }
    }

    /// The next delay (with jitter); doubles the base for the next call.
    ///
    /// ```
    /// use doorman_core::Backoff;
    /// use std::time::Duration;
    /// let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(30), 7);
    /// let d = b.next_delay();
    /// assert!(d >= Duration::from_millis(50) && d <= Duration::from_millis(100));
    /// for _ in 0..20 { assert!(b.next_delay() <= Duration::from_secs(30)); }
    /// ```
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = self.current.saturating_mul(2).min(self.max);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let frac = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(0.5 + 0.5 * frac)
    }

    /// Follows the outcome of an attempt: a success resets the backoff; a
    /// failure comes back with the delay before the retry.
    ///
    /// ```
    /// use doorman_core::Backoff;
    /// let mut b = Backoff::default();
    /// let (e, delay) = b.outcome::<(), _>(Err("down")).unwrap_err();
    /// assert_eq!(e, "down");
    /// assert!(delay.as_millis() <= 100);
    /// assert_eq!(b.outcome::<_, ()>(Ok(7)), Ok(7));
    /// ```
    pub fn outcome<T, E>(&mut self, r: Result<T, E>) -> Result<T, (E, Duration)> {
        match r {
            Ok(v) => {
                self.reset();
                Ok(v)
            }
            Err(e) => Err((e, self.next_delay())),
        }
    }

    /// Back to the initial delay (after a success).
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(30),
            0x9E37_79B9,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_maximum_never_overflows() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::MAX, 1);
        for _ in 0..200 {
            b.next_delay();
        }
        assert!(b.next_delay() >= Duration::from_secs(1 << 40));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
