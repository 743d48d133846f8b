//! The state every boundary of a running server shares: the core behind its
//! lock, the metrics, the clock, and the wake-up of the upstream task.
//! Whole-server reads and cleanup go through [`ServerState::sweep`], which
//! takes the lock for one bounded step at a time, so a scrape or a status
//! page of 100 000 resources never holds requests up for more than a step.
//!
//! Must not: decide anything (the core does), do I/O, or hold the core
//! lock for more than one step of whole-server work.

use std::sync::{Mutex, MutexGuard};

use doorman_core::server::{
    whole_pass, CapacityRequest, Counters, Grant, Refusal, ResourceGauge, ServerCore, Status,
};
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

    /// Runs `step` from position 0 until it returns `None`, taking the core
    /// lock for each step only.
    pub fn sweep(&self, mut step: impl FnMut(&mut ServerCore, usize) -> Option<usize>) {
        whole_pass(|from| step(&mut self.core(), from));
    }

    /// A status snapshot (at most `max_leases` leases per resource), taken
    /// step by step.
    pub fn status(&self, max_leases: usize) -> Status {
        let now = self.now();
        let mut status = self.core().status_header(now);
        self.sweep(|core, from| core.status_step(now, max_leases, from, &mut status.resources));
        status.finish();
        status
    }

    /// What `/metrics` exports from the core: per-resource figures (taken
    /// step by step), the counters and mastership.
    pub fn gauges(&self) -> (Vec<ResourceGauge>, Counters, bool) {
        let now = self.now();
        let mut gauges = Vec::with_capacity(self.core().resource_count());
        self.sweep(|core, from| core.gauges_step(now, from, &mut gauges));
        let core = self.core();
        (gauges, core.counters(), core.is_master())
    }

    /// One whole cleanup pass, step by step.
    pub fn cleanup(&self) {
        let now = self.now();
        self.sweep(|core, from| core.cleanup_step(now, from));
    }
}
