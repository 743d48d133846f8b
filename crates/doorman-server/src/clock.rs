//! The server's clocks, the one place in this crate that reads time:
//!
//! * [`Clock`], injected (`ServerOptions::clock`,
//!   [`lease_clock`] in production, a manual clock in tests): every time
//!   the core sees, every timestamp the server shows or writes. The
//!   shells read it through `ServerState::now`.
//! * [`instant`] and [`since`]: tokio's monotonic clock, for deadlines,
//!   timeouts and how long something took (a paused test runtime drives
//!   it).
//! * [`wall_clock`]: for a record written outside a running server (the
//!   audit record of `doorman config push`).
//!
//! The lease and wall clocks are defined once, in `doorman-net`, for the
//! server and the client library. Clippy (the workspace's `clippy.toml`)
//! fails on a clock read anywhere else in this crate or in `doorman-core`.
//!
//! Must not: hold state.

// The one place of this crate that reads time (clippy.toml).
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

pub use doorman_net::clock::{lease_clock, wall_clock, Clock};
use tokio::time::Instant;

/// Now, on tokio's monotonic clock (deadlines, timeouts, spans).
pub fn instant() -> Instant {
    Instant::now()
}

/// How long since `start` (an [`instant`]).
pub fn since(start: Instant) -> Duration {
    instant().saturating_duration_since(start)
}
