//! The core split by resource: [`ShardedCore`] holds N [`ServerCore`]s,
//! each behind its own lock, and files every resource in exactly one of
//! them by a hash of its id. Requests for resources in different shards
//! never wait for each other; a request naming many resources takes each
//! shard's lock in turn for its part and never holds two, so no order of
//! requests can deadlock. Whole-server work (sweeps, status, metrics)
//! goes shard by shard in bounded steps.
//!
//! What is not per resource — mastership, the config, waiting for one — is
//! kept by every shard alike: every change to it is applied to all shards,
//! one after the other. Between two of those locks a request may still
//! see the old state in a shard not yet changed; each resource's decision
//! is consistent with its own shard, and every rule is the one
//! [`ServerCore`] has.
//!
//! Must not: hold two shard locks at once, or decide anything itself.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use doorman_algorithms::Time;

use super::sweep::whole_pass;
use super::{
    CapacityRequest, CoreOptions, Counters, Grant, Predecessors, Refusal, ResourceAsk, ServerCore,
    Status, UpstreamAsk, UpstreamGrant, Who, DECIDE_STEP,
};
use crate::config::Config;

/// The default number of shards: four per CPU, a power of two, at most 64
/// (more shards than concurrent requests only cost memory).
pub fn default_shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 4).next_power_of_two().min(64)
}

/// What a request's decisions came to.
#[derive(Debug)]
pub struct Decided {
    /// The grants in request order, or the refusal.
    pub grants: Result<Vec<Grant>, Refusal>,
    /// A resource appeared that the parent must be asked about at once.
    pub wake_upstream: bool,
}

/// The core in shards, each behind its own lock.
#[derive(Debug)]
pub struct ShardedCore {
    shards: Box<[Mutex<ServerCore>]>,
    /// The running config, as every shard has it: read by every request
    /// (access rules) without taking a shard's lock.
    config: RwLock<Arc<Config>>,
}

impl ShardedCore {
    /// `shards` cores (at least one) with the same options and config,
    /// none of them master yet.
    pub fn new(opts: CoreOptions, config: Arc<Config>, shards: usize) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| Mutex::new(ServerCore::new(opts.clone(), config.clone())))
            .collect();
        ShardedCore {
            shards,
            config: RwLock::new(config),
        }
    }

    /// How many shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Locks shard `i`. A panic while holding a lock is a bug; its shard is
    /// still served rather than failing every later request.
    pub fn shard(&self, i: usize) -> MutexGuard<'_, ServerCore> {
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shard a resource lives in (a fixed hash: the same in every
    /// process, so tests and benchmarks can place resources).
    pub fn shard_of(&self, resource_id: &str) -> usize {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(resource_id);
        (hash % self.shards.len() as u64) as usize
    }

    /// `ids` grouped by the shard each lives in (one list per shard).
    fn by_shard(&self, ids: &[String]) -> Vec<Vec<String>> {
        let mut parts = vec![Vec::new(); self.shards.len()];
        for id in ids {
            parts[self.shard_of(id)].push(id.clone());
        }
        parts
    }

    /// Shard 0, for what every shard holds alike (config, mastership).
    fn head(&self) -> MutexGuard<'_, ServerCore> {
        self.shard(0)
    }

    /// Runs `f` on every shard, one lock at a time, in shard order.
    pub fn for_each(&self, mut f: impl FnMut(&mut ServerCore)) {
        for i in 0..self.shards.len() {
            f(&mut self.shard(i));
        }
    }

    /// Sums `f` over the shards.
    fn sum<T: std::iter::Sum>(&self, f: impl Fn(&ServerCore) -> T) -> T {
        (0..self.shards.len()).map(|i| f(&self.shard(i))).sum()
    }

    /// Decides `req` at `now`: each shard's part in steps of at most
    /// [`DECIDE_STEP`] resources, one lock per step. A refusal on the way
    /// (mastership lost) refuses the whole request; the parts already
    /// decided keep counting until their leases expire.
    pub fn decide(&self, now: Time, req: &CapacityRequest) -> Decided {
        let mut wake = false;
        let mut step = |i: usize, asks: &[ResourceAsk]| {
            let mut core = self.shard(i);
            let grants = core.decide_asks(now, &req.who, asks);
            wake |= core.take_upstream_wake();
            grants
        };
        let grants = match &req.resources[..] {
            // An empty request is still decided once: its answer may be a
            // refusal (not the master: a redirect).
            [] => step(0, &[]),
            [one] => step(self.shard_of(&one.resource_id), std::slice::from_ref(one)),
            many => self.decide_parts(many, &mut step),
        };
        Decided {
            grants,
            wake_upstream: wake,
        }
    }

    /// A request of several resources: grouped by shard, decided part by
    /// part, answered in request order.
    fn decide_parts(
        &self,
        asks: &[ResourceAsk],
        step: &mut impl FnMut(usize, &[ResourceAsk]) -> Result<Vec<Grant>, Refusal>,
    ) -> Result<Vec<Grant>, Refusal> {
        let home: Vec<usize> = asks.iter().map(|a| self.shard_of(&a.resource_id)).collect();
        let mut answers = Vec::with_capacity(self.shards.len());
        for i in 0..self.shards.len() {
            let part: Vec<ResourceAsk> = (asks.iter().zip(&home))
                .filter(|(_, h)| **h == i)
                .map(|(a, _)| a.clone())
                .collect();
            let mut grants = Vec::with_capacity(part.len());
            for chunk in part.chunks(DECIDE_STEP) {
                grants.extend(step(i, chunk)?);
            }
            answers.push(grants.into_iter().peekable());
        }
        // Each part keeps its order; a resource left unanswered (pending
        // upstream) is missing from its part.
        let mut out = Vec::with_capacity(asks.len());
        for (ask, h) in asks.iter().zip(&home) {
            let part = &mut answers[*h];
            if let Some(g) = part.next_if(|g| g.resource_id == ask.resource_id) {
                out.push(g);
            }
        }
        Ok(out)
    }

    /// ReleaseCapacity: forgets the requester's leases on these resources,
    /// each in its shard. Returns how many were forgotten.
    pub fn release(&self, who: &Who, resource_ids: &[String]) -> Result<usize, Refusal> {
        if let [one] = resource_ids {
            return self.shard(self.shard_of(one)).release(who, resource_ids);
        }
        let mut n = 0;
        for (i, ids) in self.by_shard(resource_ids).iter().enumerate() {
            // An empty part still checks mastership (the answer to a
            // standby is a redirect).
            if !ids.is_empty() || i == 0 {
                n += self.shard(i).release(who, ids)?;
            }
        }
        Ok(n)
    }

    /// The running config.
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// True when this server is the master.
    pub fn is_master(&self) -> bool {
        self.head().is_master()
    }

    /// The master's address as far as this server knows.
    pub fn master_address(&self) -> Option<String> {
        self.head().master_address().map(str::to_string)
    }

    /// Whether this server is the master as far as it can prove at `now`,
    /// and the master's address, read together (one lock: no step-down
    /// can fall between the two); see [`ServerCore::mastership_at`].
    pub fn mastership(&self, now: Time) -> (bool, Option<String>) {
        self.head().mastership_at(now)
    }

    /// See [`ServerCore::set_master_until`]; every shard.
    pub fn set_master_until(&self, until: Option<Time>) {
        self.for_each(|c| c.set_master_until(until));
    }

    /// See [`ServerCore::become_master`]; every shard.
    pub fn become_master(&self, now: Time) {
        self.for_each(|c| c.become_master(now));
    }

    /// See [`ServerCore::become_master_after`] and
    /// [`ServerCore::set_lease_bound`]; every shard, each with its bound
    /// set before it becomes master.
    pub fn become_master_after(&self, now: Time, predecessors: Predecessors, bound: Option<Time>) {
        self.for_each(|c| {
            c.set_lease_bound(bound);
            c.become_master_after(now, predecessors);
        });
    }

    /// The lease bound (the same in every shard).
    pub fn lease_bound(&self) -> Option<Time> {
        self.shard(0).lease_bound()
    }

    /// See [`ServerCore::set_lease_bound`]; every shard.
    pub fn set_lease_bound(&self, bound: Option<Time>) {
        self.for_each(|c| c.set_lease_bound(bound));
    }

    /// The horizon to record now, if any shard needs it moved on (see
    /// [`ServerCore::horizon_due`]).
    pub fn horizon_due(&self, now: Time) -> Option<Time> {
        (0..self.shards.len())
            .filter_map(|i| self.shard(i).horizon_due(now))
            .max()
    }

    /// See [`ServerCore::horizon_lead`] (the same in every shard).
    pub fn horizon_lead(&self) -> super::HorizonLead {
        self.shard(0).horizon_lead()
    }

    /// See [`ServerCore::fresh_horizon`] (the latest any shard needs).
    pub fn fresh_horizon(&self, now: Time) -> Time {
        (0..self.shards.len())
            .map(|i| self.shard(i).fresh_horizon(now))
            .max()
            .unwrap_or(now)
    }

    /// See [`ServerCore::step_down`]; every shard.
    pub fn step_down(&self, master: Option<String>) {
        self.for_each(|c| c.step_down(master.clone()));
    }

    /// See [`ServerCore::set_master_address`]; every shard.
    pub fn set_master_address(&self, master: Option<String>) {
        self.for_each(|c| c.set_master_address(master.clone()));
    }

    /// See [`ServerCore::wait_for_config`]; every shard.
    pub fn wait_for_config(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.for_each(|c| c.wait_for_config(reason.clone()));
    }

    /// True while the server waits for its first config.
    pub fn waiting_for_config(&self) -> bool {
        self.head().waiting_for_config()
    }

    /// See [`ServerCore::replace_config`]; every shard. Returns the old
    /// config, to be dropped by the caller outside any lock.
    pub fn replace_config(&self, config: Arc<Config>) -> Arc<Config> {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config.clone();
        let mut old = Vec::with_capacity(self.shards.len());
        self.for_each(|c| old.push(c.replace_config(config.clone())));
        old.swap_remove(0)
    }

    /// See [`ServerCore::readiness`]: the same verdict over all shards.
    pub fn readiness(&self, now: Time) -> Result<(), String> {
        let Some(mut gap) = self.head().readiness_parts(now)? else {
            return Ok(());
        };
        for i in 1..self.shards.len() {
            if let Some(g) = self.shard(i).readiness_parts(now)? {
                gap.add(g);
            }
        }
        gap.verdict()
    }

    /// The counters, summed over the shards.
    pub fn counters(&self) -> Counters {
        let mut sum = Counters::default();
        self.for_each(|c| {
            sum.unmatched_requests += c.counters().unmatched_requests;
            sum.expired_leases += c.counters().expired_leases;
        });
        sum
    }

    /// Number of resources with state.
    pub fn resource_count(&self) -> usize {
        self.sum(ServerCore::resource_count)
    }

    /// Number of live leases over all resources.
    pub fn lease_count(&self) -> usize {
        self.sum(ServerCore::lease_count)
    }

    /// Runs a step-wise whole-server pass (`cleanup_step`, `status_step`,
    /// `gauges_step`) over every shard, one lock per step.
    pub fn sweep(&self, mut step: impl FnMut(&mut ServerCore, usize) -> Option<usize>) {
        for i in 0..self.shards.len() {
            whole_pass(|from| step(&mut self.shard(i), from));
        }
    }

    /// Everything of a status but the resources (see
    /// [`ServerCore::status_header`]), with counters over all shards.
    pub fn status_header(&self, now: Time) -> Status {
        let mut status = self.head().status_header(now);
        status.unmatched_requests = self.counters().unmatched_requests;
        status
    }

    /// A whole status in one call (tests and tools).
    pub fn status(&self, now: Time, max_leases: usize) -> Status {
        let mut status = self.status_header(now);
        let resources = &mut status.resources;
        self.sweep(|c, from| c.status_step(now, max_leases, from, resources));
        status.finish();
        status
    }

    /// A whole cleanup pass, step by step.
    pub fn cleanup(&self, now: Time) {
        self.sweep(|c, from| c.cleanup_step(now, from));
    }
}

/// The upstream side (an intermediate server): one bulk request over all
/// shards, its answer filed back by shard.
impl ShardedCore {
    /// When the upstream task should next wake: the earliest shard's.
    pub fn next_upstream_wakeup(&self) -> Option<Time> {
        (0..self.shards.len())
            .filter_map(|i| self.shard(i).next_upstream_wakeup())
            .min()
    }

    /// See [`ServerCore::upstream_request`]: if a resource in any shard is
    /// due, one request for every resource in use that the minimum
    /// interval allows, from all shards, sorted by id.
    pub fn upstream_request(&self, now: Time) -> Option<Vec<UpstreamAsk>> {
        let due = (0..self.shards.len()).any(|i| self.shard(i).upstream_due(now));
        if !due {
            return None;
        }
        let mut asks = Vec::new();
        self.for_each(|c| asks.extend(c.upstream_asks(now)));
        asks.sort_by(|a, b| a.resource_id.cmp(&b.resource_id));
        (!asks.is_empty()).then_some(asks)
    }

    /// See [`ServerCore::upstream_response`]; each shard gets its part.
    pub fn upstream_response(&self, now: Time, requested: &[String], grants: &[UpstreamGrant]) {
        let ids = self.by_shard(requested);
        let mut parts = vec![Vec::new(); self.shards.len()];
        for g in grants {
            parts[self.shard_of(&g.resource_id)].push(g.clone());
        }
        for (i, (ids, grants)) in ids.iter().zip(&parts).enumerate() {
            if !ids.is_empty() || !grants.is_empty() {
                self.shard(i).upstream_response(now, ids, grants);
            }
        }
    }

    /// See [`ServerCore::upstream_failure`]; each shard gets its part.
    pub fn upstream_failure(&self, now: Time, requested: &[String], backoff: Time) {
        let ids = self.by_shard(requested);
        for (i, ids) in ids.iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            self.shard(i).upstream_failure(now, ids, backoff);
        }
    }
}
