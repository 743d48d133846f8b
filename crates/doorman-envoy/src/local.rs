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

use doorman_core::server::Sharded;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use std::time::Duration;

use doorman_core::client::{ClientCore, CoreOptions};
use doorman_core::config::Unit;
use doorman_core::limiter::{TokenBucket, UsageWindow};
use doorman_core::server::{Decision, Who};
use doorman_lease::{Span, Time};
use tokio::sync::watch;

use super::{refresh, refusal_reason};
use doorman_state::ServerState;

/// The burst a bucket holds: this long at the leased rate (the client
/// library's default).
pub const BURST: Duration = Duration::from_millis(100);
/// The fewest whole requests a bucket holds, at any rate: with one, the
/// admitted rate under demand falls short of the lease (see
/// `TokenBucket::with_min_burst`).
pub const MIN_BURST: f64 = 2.0;
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
    /// The resource is in shadow mode: the caller admits the hits whatever
    /// `allowed` says and counts a refusal apart.
    pub shadow: bool,
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
    last_hit: Time,
    unmatched: bool,
    shadow: bool,
    /// Created and not yet given a rate: filled when it gets one.
    fresh: bool,
}

impl Local {
    fn new(now: Time, unit: Unit) -> Self {
        Local {
            bucket: TokenBucket::new(now, BURST).with_min_burst(MIN_BURST),
            window: UsageWindow::new(now),
            unit,
            last_hit: now,
            unmatched: false,
            shadow: false,
            fresh: true,
        }
    }
}

type Shard = HashMap<String, Local>;

/// The in-process requester. A hit takes only its resource's shard lock
/// (the core's shard rule: `doorman_core::server::shard_of`), so hits on resources
/// of different shards never wait for each other. The refresh schedule is
/// one [`ClientCore`] behind its own lock, taken by the periodic exchange
/// and by the first hit of a new resource; whoever holds it takes shard
/// locks one at a time, never the other way round.
pub struct LocalRequester {
    who: Who,
    shards: Box<[Mutex<Shard>]>,
    schedule: Mutex<ClientCore>,
    /// Set while the core refuses to answer; `refused` then says why.
    refusing: AtomicBool,
    refused: Mutex<Option<String>>,
}

impl std::fmt::Debug for LocalRequester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRequester")
            .field("who", &self.who)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LocalRequester {
    /// A requester named `client_id` in this server's core, its resources
    /// in `shards` shards (the core's count).
    pub fn new(client_id: &str, shards: usize) -> Self {
        LocalRequester {
            who: Who::Client(client_id.into()),
            shards: (0..shards.max(1)).map(|_| Mutex::default()).collect(),
            schedule: Mutex::new(ClientCore::new(client_id, CoreOptions::default())),
            refusing: AtomicBool::new(false),
            refused: Mutex::new(None),
        }
    }

    fn shard(&self, state: &ServerState, id: &str) -> MutexGuard<'_, Shard> {
        let i = state.core().shard_index(id) % self.shards.len();
        lock(&self.shards[i])
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
        // The one clock read of a hit: the server's clock, as the core's.
        let now = state.now();
        let mut new = Vec::new();
        for (id, unit, hits) in asks {
            let mut shard = self.shard(state, id);
            // The id is copied only for a new resource, not on every hit.
            if !shard.contains_key(id.as_str()) {
                new.push(id.as_str());
                shard.insert(id.clone(), Local::new(now, *unit));
            }
            if let Some(local) = shard.get_mut(id.as_str()) {
                local.window.record_call(now, *hits as f64);
                local.last_hit = now;
                local.unit = *unit;
            }
        }
        if !new.is_empty() {
            let mut core = lock(&self.schedule);
            for id in new {
                if core.wants(id).is_none() {
                    core.add(id, 0, 0.0, now);
                }
            }
            self.exchange(state, &mut core, now);
        }
        if self.refusing.load(Ordering::Acquire) {
            if let Some(why) = lock(&self.refused).clone() {
                return Err(why);
            }
        }
        Ok(asks
            .iter()
            .map(|(id, _, hits)| admit_one(&mut self.shard(state, id), id, *hits, now))
            .collect())
    }

    fn set_refused(&self, why: Option<String>) {
        let mut refused = lock(&self.refused);
        self.refusing.store(why.is_some(), Ordering::Release);
        *refused = why;
    }

    /// Samples wants, sends what is due to the core, applies the answer
    /// and sets each bucket's rate. The caller holds the schedule.
    fn exchange(&self, state: &ServerState, core: &mut ClientCore, now: Time) {
        for shard in self.shards.iter() {
            for (id, l) in lock(shard).iter() {
                core.set_wants(id, l.window.rate(now) * l.unit.seconds(), now);
            }
        }
        match refresh(state, &self.who, core) {
            None => {}
            Some(Ok(grants)) => {
                self.set_refused(None);
                for g in grants {
                    if let Some(l) = self.shard(state, &g.resource_id).get_mut(&g.resource_id) {
                        l.unmatched = g.decision == Decision::Unmatched;
                        l.shadow = g.shadow;
                    }
                }
            }
            Some(Err(refusal)) => self.set_refused(Some(refusal_reason(&refusal))),
        }
        for shard in self.shards.iter() {
            for (id, l) in lock(shard).iter_mut() {
                let capacity = core.capacity(id, now).map_or(0.0, |c| c.0);
                l.bucket.set_rate(capacity / l.unit.seconds(), now);
                if l.fresh && l.bucket.rate() > 0.0 {
                    l.fresh = false;
                    l.bucket.fill(now);
                }
            }
        }
    }

    /// Releases resources without a hit for [`IDLE`]. The caller holds the
    /// schedule.
    fn release_idle(&self, state: &ServerState, core: &mut ClientCore, now: Time) {
        let mut idle = Vec::new();
        for shard in self.shards.iter() {
            lock(shard).retain(|id, l| {
                let keep = (now - l.last_hit) < Span::from_duration(IDLE);
                if !keep {
                    idle.push(id.clone());
                }
                keep
            });
        }
        if idle.is_empty() {
            return;
        }
        for id in &idle {
            core.remove(id);
        }
        // Not the master: the lease expires on its own.
        let _ = state.core().release(&self.who, &idle);
    }

    /// Refreshes leases on schedule until `stop`, then releases them all.
    pub async fn run(self: Arc<Self>, state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
        loop {
            let sleep = {
                let now = state.now();
                let mut core = lock(&self.schedule);
                self.release_idle(&state, &mut core, now);
                self.exchange(&state, &mut core, now);
                let next = core.next_wakeup(now).map(|t| (t - now).to_duration());
                next.unwrap_or(TICK).min(TICK)
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = stop.changed() => break,
            }
        }
        let ids: Vec<String> = self
            .shards
            .iter()
            .flat_map(|s| lock(s).keys().cloned().collect::<Vec<_>>())
            .collect();
        // Only with something to release: a step-down may hold the core
        // lock while the server stops, and a worker blocked here for
        // nothing would be one fewer to finish it.
        if !ids.is_empty() {
            let _ = state.core().release(&self.who, &ids);
        }
    }
}

/// Admits `hits` on `id` from its bucket.
fn admit_one(shard: &mut Shard, id: &str, hits: u64, now: Time) -> Admission {
    let Some(l) = shard.get_mut(id) else {
        return Admission {
            allowed: false,
            unmatched: false,
            shadow: false,
            limit: 0.0,
            remaining: 0,
            reset: Duration::ZERO,
        };
    };
    // More hits than a second's worth (or the burst) are refused without
    // taking anything: the bucket would lend them and refuse everybody
    // until the debt was paid.
    let most = l.bucket.burst().max(l.bucket.rate());
    let allowed = hits as f64 <= most && l.bucket.try_take(hits as f64, now).is_ok();
    let unit = l.unit.seconds();
    Admission {
        allowed,
        unmatched: l.unmatched,
        shadow: l.shadow,
        limit: l.bucket.rate() * unit,
        remaining: l.bucket.tokens(now).max(0.0).floor().min(u32::MAX as f64) as u32,
        reset: l.bucket.until_full(now),
    }
}
