//! Who a client is and what time it is: the lease clock (the one clock
//! leases are measured on, by the library and the server), the wall
//! clock, the host name and default client ids.
//!
//! Must not: hold state beyond the per-process client counter and the
//! lease clock's starting point.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use doorman_core::Time;
pub use doorman_net::hostname;

/// Where the client gets the time ([`lease_clock`] by default).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// The clock leases are measured on: the wall clock as it read at this
/// process's first call, advanced by the monotonic clock since. It starts
/// near the wall clock (so times it writes on the wire, and in logs, are
/// about right), but a step of the wall clock later (NTP, an operator, a
/// VM resumed) never moves it: a lease measured on it ends when it should.
/// Leases between two doorman-rs processes do not depend on their wall
/// clocks at all (the wire carries each lease's remaining length, see
/// `doorman_algorithms::Lease::received`).
pub fn lease_clock() -> Time {
    static START: OnceLock<(std::time::Instant, Time)> = OnceLock::new();
    let (at, wall) = START.get_or_init(|| (std::time::Instant::now(), wall_clock()));
    *wall + Time::from_duration(at.elapsed())
}

/// The wall clock (for people: when something happened; never for leases).
pub fn wall_clock() -> Time {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(0);

/// `<hostname>:<pid>:<n>`, unique per `Client` in a process.
pub fn default_client_id() -> String {
    format!(
        "{}:{}:{}",
        hostname(),
        std::process::id(),
        NEXT_CLIENT.fetch_add(1, Ordering::Relaxed)
    )
}
