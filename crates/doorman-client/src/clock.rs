//! The client's readers of time, and the only ones: the lease clock is
//! injected (`ClientBuilder`'s clock, `lease_clock` by default, read
//! through `ClientShared::now`); the monotonic clock that drives the
//! limiters, waits and deadlines is tokio's (paused and advanced by tests);
//! the wall clock is read only for what a person reads (when a call last
//! succeeded).
//!
//! Must not: be bypassed (clippy, per the workspace's `clippy.toml`,
//! fails on a clock read elsewhere in the client).

// The one place of this crate that reads time (clippy.toml).
#![allow(clippy::disallowed_methods)]

/// Now on tokio's monotonic clock.
pub(crate) fn instant() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// Now on the wall clock (for display only).
pub(crate) fn wall() -> std::time::SystemTime {
    std::time::SystemTime::now()
}
