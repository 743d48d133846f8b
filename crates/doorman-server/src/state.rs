//! The state every boundary of a running server shares: the core behind its
//! lock, the metrics, the clock, and the wake-up of the upstream task.
//!
//! Must not: decide anything (the core does) or do I/O.

use std::sync::{Mutex, MutexGuard};

use doorman_core::server::{CapacityRequest, Grant, Refusal, ServerCore};
use doorman_core::Time;

use crate::metrics::Metrics;

/// Where the server gets the time from (the wall clock in production).
pub type Clock = std::sync::Arc<dyn Fn() -> Time + Send + Sync>;

/// State shared by the gRPC service, the HTTP endpoints and background tasks.
pub struct ServerState {
    core: Mutex<ServerCore>,
    /// Wakes the upstream task (a new resource must be asked for at once).
    pub upstream_wake: tokio::sync::Notify,
    /// The server's metrics.
    pub metrics: Metrics,
    /// The clock.
    pub clock: Clock,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState").finish_non_exhaustive()
    }
}

impl ServerState {
    /// Wraps a core.
    pub fn new(core: ServerCore, metrics: Metrics, clock: Clock) -> Self {
        ServerState {
            core: Mutex::new(core),
            upstream_wake: tokio::sync::Notify::new(),
            metrics,
            clock,
        }
    }

    /// Locks the core. A panic while holding the lock is a bug; the state is
    /// still served rather than failing every later request.
    pub fn core(&self) -> MutexGuard<'_, ServerCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current time.
    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// Runs a capacity request through the core and wakes the upstream task
    /// if it created a resource the parent must be asked about.
    pub fn decide(&self, req: &CapacityRequest) -> Result<Vec<Grant>, Refusal> {
        let now = self.now();
        let mut core = self.core();
        let out = core.get_capacity(now, req);
        if core.take_upstream_wake() {
            self.upstream_wake.notify_one();
        }
        out
    }
}
