//! Who a client is and what time it is: the lease clock (the one clock
//! leases are measured on, by the library and the server) and the wall
//! clock (both from `doorman-net`, defined once), the host name and
//! default client ids.
//!
//! Must not: hold state beyond the per-process client counter.

pub use doorman_net::hostname;
use std::sync::atomic::{AtomicU64, Ordering};

pub use doorman_net::clock::{lease_clock, wall_clock, Clock};

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
