//! The clocks both sides of a connection read, defined once: the lease
//! clock (the one clock leases are measured on, by the client library and
//! the server) and the wall clock (for people), and [`Clock`], the type of
//! a clock injected into either (a manual one in tests), and [`instant`],
//! the monotonic clock of deadlines and suspect windows (tokio's, paused
//! and advanced by tests).
//!
//! Must not: hold state beyond the lease clock's starting point.

// The one place of this crate that reads time (clippy.toml).
#![allow(clippy::disallowed_methods)]

use std::sync::{Arc, OnceLock};

use doorman_lease::{Span, Time};

/// An injected clock: where a client or a server gets the time
/// ([`lease_clock`] in production).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// The clock leases are measured on: the wall clock as it read at this
/// process's first call, advanced by the monotonic clock since. It starts
/// near the wall clock (so times it writes on the wire, and in logs, are
/// about right), but a step of the wall clock later (NTP, an operator, a
/// VM resumed) never moves it: a lease measured on it ends when it should.
/// Leases between two doorman-rs processes do not depend on their wall
/// clocks at all (the wire carries each lease's remaining length, see
/// `doorman_lease::Lease::received`).
pub fn lease_clock() -> Time {
    static START: OnceLock<(std::time::Instant, Time)> = OnceLock::new();
    let (at, wall) = START.get_or_init(|| (std::time::Instant::now(), wall_clock()));
    *wall + Span::from_duration(at.elapsed())
}

/// The wall clock (for people: when something happened; never for leases).
pub fn wall_clock() -> Time {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// Now on tokio's monotonic clock (deadlines, suspect windows).
pub fn instant() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// How long since `start` (an [`instant`]).
pub fn since(start: tokio::time::Instant) -> std::time::Duration {
    instant().saturating_duration_since(start)
}
