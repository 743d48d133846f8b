//! Who a client is and what time it is: the wall clock (the only clock the
//! library and the server read), the host name and default client ids.
//!
//! Must not: hold state beyond the per-process client counter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use doorman_core::Time;

/// Where the client gets the time (wall clock by default).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// The wall clock.
pub fn wall_clock() -> Time {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time::from_millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

static NEXT_CLIENT: AtomicU64 = AtomicU64::new(0);

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `$HOSTNAME`, else `localhost`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// `<hostname>:<pid>:<n>`, unique per `Client` in a process.
pub fn default_client_id() -> String {
    format!(
        "{}:{}:{}",
        hostname(),
        std::process::id(),
        NEXT_CLIENT.fetch_add(1, Ordering::Relaxed)
    )
}
