//! The server as a Doorman client of its own tree, for Envoy's RLS: one
//! requester (`client:envoy-rls`) whose requests go straight into this
//! server's core (a root decides, an intermediate passes the demand up with
//! its other clients'), with the client library's parts: a
//! [`ClientCore`] (refresh schedule, early refresh on a change of wants,
//! fallback), a usage window per resource estimating wants from the hits
//! seen (allowed or not) and a token bucket per resource refilled at the
//! leased rate. A hit is admitted or refused from the bucket, without
//! waiting on anything.
//!
//! Must not: decide capacity (the core does) or talk to Envoy (`rls.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use doorman_client::limiter::{TokenBucket, UsageWindow};
use doorman_client::{ClientCore, CoreOptions};
use doorman_core::config::Unit;
use doorman_core::server::{Decision, Who};
use tokio::sync::{watch, Notify};
use tokio::time::{Duration, Instant};

use super::{refresh, refusal_reason};
use crate::state::ServerState;

/// The burst a bucket holds: this long at the leased rate (the client
/// library's default).
pub const BURST: Duration = Duration::from_millis(100);
/// A resource without a hit for this long is released.
pub const IDLE: Duration = Duration::from_secs(60);
/// How often wants are sampled and the schedule looked at.
const TICK: Duration = Duration::from_secs(1);

/// What one descriptor's hits got.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// Admitted.
    pub allowed: bool,
    /// No template matches the resource (admission is then the config's
    /// `[envoy] unmatched` choice, not the bucket's).
    pub unmatched: bool,
    /// The leased capacity, in the descriptor's unit.
    pub limit: f64,
    /// Whole requests left in the bucket.
    pub remaining: u32,
    /// Until the bucket is full again.
    pub reset: Duration,
}

struct Local {
    bucket: TokenBucket,
    window: UsageWindow,
    unit: Unit,
    last_hit: Instant,
    unmatched: bool,
    /// Created and not yet given a rate: filled when it gets one.
    fresh: bool,
}

struct Inner {
    core: ClientCore,
    resources: HashMap<String, Local>,
    /// Why the core refused the last request, while it does.
    refused: Option<String>,
}

/// The in-process requester.
pub struct LocalRequester {
    who: Who,
    inner: Mutex<Inner>,
    wake: Notify,
}

impl std::fmt::Debug for LocalRequester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRequester")
            .field("who", &self.who)
            .finish_non_exhaustive()
    }
}

impl LocalRequester {
    /// A requester named `client_id` in this server's core.
    pub fn new(client_id: &str) -> Self {
        LocalRequester {
            who: Who::Client(client_id.into()),
            inner: Mutex::new(Inner {
                core: ClientCore::new(client_id, CoreOptions::default()),
                resources: HashMap::new(),
                refused: None,
            }),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `hits` on each `(resource, unit)` and admits or refuses them;
    /// a resource seen for the first time is asked for at once. `Err(why)`
    /// while this server's core refuses to answer (not the master, no
    /// config): Envoy's failure mode then applies.
    pub fn admit(
        &self,
        state: &ServerState,
        asks: &[(String, Unit, u64)],
    ) -> Result<Vec<Admission>, String> {
        let instant = Instant::now();
        let mut inner = self.lock();
        let mut new = false;
        for (id, unit, hits) in asks {
            let local = inner.resources.entry(id.clone()).or_insert_with(|| {
                new = true;
                Local {
                    bucket: TokenBucket::new(instant, BURST),
                    window: UsageWindow::new(instant),
                    unit: *unit,
                    last_hit: instant,
                    unmatched: false,
                    fresh: true,
                }
            });
            local.window.record_call(instant, *hits as f64);
            local.last_hit = instant;
            local.unit = *unit;
        }
        if new {
            let now = state.now();
            for (id, ..) in asks {
                if inner.core.wants(id).is_none() {
                    inner.core.add(id, 0, 0.0, now);
                }
            }
            self.exchange(state, &mut inner, instant);
        }
        if let Some(why) = &inner.refused {
            return Err(why.clone());
        }
        Ok(asks
            .iter()
            .map(|(id, _, hits)| admit_one(&mut inner, id, *hits, instant))
            .collect())
    }

    /// Samples wants, sends what is due to the core, applies the answer
    /// and sets each bucket's rate.
    fn exchange(&self, state: &ServerState, inner: &mut Inner, instant: Instant) {
        let now = state.now();
        let Inner {
            core, resources, ..
        } = inner;
        for (id, l) in resources.iter() {
            core.set_wants(id, l.window.rate(instant) * l.unit.seconds(), now);
        }
        match refresh(state, &self.who, &mut inner.core) {
            None => {}
            Some(Ok(grants)) => {
                inner.refused = None;
                for g in grants {
                    if let Some(l) = inner.resources.get_mut(&g.resource_id) {
                        l.unmatched = g.decision == Decision::Unmatched;
                    }
                }
            }
            Some(Err(refusal)) => inner.refused = Some(refusal_reason(&refusal)),
        }
        for (id, l) in inner.resources.iter_mut() {
            let capacity = inner.core.capacity(id, now).map_or(0.0, |c| c.0);
            l.bucket.set_rate(capacity / l.unit.seconds(), instant);
            if l.fresh && l.bucket.rate() > 0.0 {
                l.fresh = false;
                l.bucket.fill(instant);
            }
        }
    }

    /// Releases resources without a hit for [`IDLE`].
    fn release_idle(&self, state: &ServerState, inner: &mut Inner, instant: Instant) {
        let idle: Vec<String> = inner
            .resources
            .iter()
            .filter(|(_, l)| instant.saturating_duration_since(l.last_hit) >= IDLE)
            .map(|(id, _)| id.clone())
            .collect();
        if idle.is_empty() {
            return;
        }
        for id in &idle {
            inner.resources.remove(id);
            inner.core.remove(id);
        }
        // Not the master: the lease expires on its own.
        let _ = state.core().release(&self.who, &idle);
    }

    /// Refreshes leases on schedule until `stop`, then releases them all.
    pub async fn run(self: Arc<Self>, state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
        loop {
            let sleep = {
                let instant = Instant::now();
                let mut inner = self.lock();
                self.release_idle(&state, &mut inner, instant);
                self.exchange(&state, &mut inner, instant);
                let now = state.now();
                let next = inner.core.next_wakeup(now).map(|t| (t - now).to_duration());
                next.unwrap_or(TICK).min(TICK)
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.wake.notified() => {}
                _ = stop.changed() => break,
            }
        }
        let ids: Vec<String> = self.lock().resources.keys().cloned().collect();
        // Only with something to release: a step-down may hold the core
        // lock while the server stops, and a worker blocked here for
        // nothing would be one fewer to finish it.
        if !ids.is_empty() {
            let _ = state.core().release(&self.who, &ids);
        }
    }
}

/// Admits `hits` on `id` from its bucket.
fn admit_one(inner: &mut Inner, id: &str, hits: u64, instant: Instant) -> Admission {
    let Some(l) = inner.resources.get_mut(id) else {
        return Admission {
            allowed: false,
            unmatched: false,
            limit: 0.0,
            remaining: 0,
            reset: Duration::ZERO,
        };
    };
    // More hits than a second's worth (or the burst) are refused without
    // taking anything: the bucket would lend them and refuse everybody
    // until the debt was paid.
    let most = l.bucket.burst().max(l.bucket.rate());
    let allowed = hits as f64 <= most && l.bucket.try_take(hits as f64, instant).is_ok();
    let unit = l.unit.seconds();
    Admission {
        allowed,
        unmatched: l.unmatched,
        limit: l.bucket.rate() * unit,
        remaining: l
            .bucket
            .tokens(instant)
            .max(0.0)
            .floor()
            .min(u32::MAX as f64) as u32,
        reset: l.bucket.until_full(instant),
    }
}
