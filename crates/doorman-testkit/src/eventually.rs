//! Polling a condition until it holds: the one helper every asynchronous
//! test uses instead of a fixed sleep.
//!
//! Must not: hide a failure; a condition that never holds panics with what
//! was awaited.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is checked.
const POLL: Duration = Duration::from_millis(10);

/// Checks `f` every 10 ms until it holds; panics naming `what` after
/// `limit`. Returns how long it took.
pub async fn eventually(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    eventually_async(what, limit, || std::future::ready(f())).await
}

/// [`eventually`] for a condition that must itself await.
pub async fn eventually_async<F, Fut>(what: &str, limit: Duration, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !f().await {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(POLL).await;
    }
    start.elapsed()
}

/// [`eventually`] for tests without a runtime (the thread sleeps).
pub fn eventually_blocking(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        std::thread::sleep(POLL);
    }
    start.elapsed()
}
