//! The one place in this crate that reads time: tokio's monotonic clock,
//! for the election's deadlines and keep-alives (a paused test runtime
//! drives it), and the wall clock (`doorman-net`'s), for the time an
//! audit record says a config was pushed; and the election's tickers.
//!
//! Must not: hold state.

// The one place of this crate that reads time (clippy.toml).
#![allow(clippy::disallowed_methods)]

pub use doorman_net::clock::wall_clock;
use std::time::Duration;
use tokio::time::Instant;

/// Now, on tokio's monotonic clock.
pub fn instant() -> Instant {
    Instant::now()
}

/// An interval whose missed ticks are delayed, not bunched.
pub(crate) fn ticker(period: Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval(period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}
