//! A clock tests move by hand, to inject into a server
//! (`ServerOptions::clock`).
//!
//! Must not: read the real clock after it is created.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use doorman_lease::Time;
use doorman_state::state::Clock;

/// A clock tests move by hand; clones share the time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl ManualClock {
    /// A clock at a fixed date (2023-11-14).
    pub fn new() -> Self {
        ManualClock(Arc::new(AtomicI64::new(1_700_000_000_000)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, secs: f64) {
        self.0.fetch_add((secs * 1000.0) as i64, Ordering::SeqCst);
    }

    /// The time, whole seconds since the epoch.
    pub fn now_secs(&self) -> i64 {
        self.0.load(Ordering::SeqCst) / 1000
    }

    /// The time.
    pub fn now(&self) -> Time {
        Time::from_millis(self.0.load(Ordering::SeqCst))
    }

    /// A server clock that reads this one.
    pub fn clock(&self) -> Clock {
        let c = self.clone();
        Arc::new(move || c.now())
    }
}
