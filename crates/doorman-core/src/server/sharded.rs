//! The lease server's entry points, over a node and its shards: the one
//! place that knows a server is split by resource. Every resource lives
//! in exactly one shard, by a fixed hash of its id ([`shard_of`]);
//! requests for resources in different shards touch different shards; a
//! request naming many resources goes shard by shard in steps of at most
//! [`DECIDE_STEP`] resources, and whole-server work (sweeps, status,
//! metrics) in bounded steps.
//!
//! How the node and the shards are held is the caller's: the core holds
//! them plainly ([`ServerCore`], for the simulator, tests and tools); the
//! server puts the node behind a read-write lock and each shard behind
//! its own lock (`doorman-server` `core_locks.rs`). Both get every rule
//! from here, through [`ShardAccess`].
//!
//! Must not: reach the node from inside a shard's access (a lock held
//! by a shell's access is never taken twice), or decide anything about a
//! resource itself (the shard does).
//!
//! [`ServerCore`]: super::ServerCore

use std::sync::Arc;

use doorman_lease::{Span, Time};

use super::horizon::UpstreamReach;
use super::push::{Candidates, Push, PushRule};
use super::sweep::whole_pass;
use super::{
    CapacityRequest, Counters, Grant, HorizonLead, Node, NotReady, Predecessors, Refusal,
    ResourceAsk, ResourceShard, Status, UpstreamAsk, UpstreamGrant, Who, DECIDE_STEP,
};
use crate::config::Config;

/// How a shell holds a server's node and shards. Each call runs `f`
/// with what it asks for and nothing else held by the caller; an
/// implementation with locks takes the node's (shared for a shard's
/// work) before a shard's, never two shards' at once.
pub trait ShardAccess {
    /// How many shards (at least one, fixed for the server's life).
    fn shard_count(&self) -> usize;
    /// Runs `f` with the node.
    fn node<R>(&mut self, f: impl FnOnce(&Node) -> R) -> R;
    /// Runs `f` with the node to change.
    fn node_mut<R>(&mut self, f: impl FnOnce(&mut Node) -> R) -> R;
    /// Runs `f` with the node and shard `i`.
    fn shard<R>(&mut self, i: usize, f: impl FnOnce(&Node, &mut ResourceShard) -> R) -> R;
}

/// The shard a resource lives in among `shards` (a fixed hash: the same
/// in every process, so tests and benchmarks can place resources).
/// FNV-1a, not a keyed hash: a client that crowds one shard with ids
/// chosen for it contends no more than one asking for one resource many
/// times (SipHash cost about 190 instructions per request here, measured
/// with callgrind).
pub fn shard_of(resource_id: &str, shards: usize) -> usize {
    let hash = resource_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    // FNV's low bits depend only on the low bits of each byte ("A" and "a"
    // would share a shard among 32): fold the high half in.
    ((hash ^ (hash >> 32)) % shards.max(1) as u64) as usize
}

/// What a request's decisions came to.
#[derive(Debug)]
pub struct Decided {
    /// The grants in request order, or the refusal.
    pub grants: Result<Vec<Grant>, Refusal>,
    /// A resource appeared that the parent must be asked about at once.
    pub wake_upstream: bool,
    /// A decision changed what someone would get (the lease streams'
    /// pusher has something to look at).
    pub moved: bool,
}

/// The entry points of a lease server, for any [`ShardAccess`].
pub trait Sharded: ShardAccess {
    /// Runs `f` on shard `i`, brought up to the node's term first.
    fn with_shard<R>(&mut self, i: usize, f: impl FnOnce(&Node, &mut ResourceShard) -> R) -> R {
        self.shard(i, |node, shard| {
            shard.sync(node);
            f(node, shard)
        })
    }

    /// The shard `resource_id` lives in.
    fn shard_index(&self, resource_id: &str) -> usize {
        shard_of(resource_id, self.shard_count())
    }

    /// Decides `req` at `now`: each shard's part in steps of at most
    /// [`DECIDE_STEP`] resources. A refusal on the way (mastership lost)
    /// refuses the whole request; the parts already decided keep counting
    /// until their leases expire. Says whether the upstream task must
    /// wake (taking that flag of the shards it touched).
    fn decide(&mut self, now: Time, req: &CapacityRequest) -> Decided {
        decide_request(self, now, req, true)
    }

    /// [`Sharded::decide`] leaving the upstream wake flags to
    /// [`Sharded::take_upstream_wake`] (GetCapacity in tests and tools).
    fn get_capacity(&mut self, now: Time, req: &CapacityRequest) -> Result<Vec<Grant>, Refusal> {
        decide_request(self, now, req, false).grants
    }

    /// True (once) when a new resource appeared in any shard that the
    /// parent should be asked about at once.
    fn take_upstream_wake(&mut self) -> bool {
        let mut wake = false;
        for i in 0..self.shard_count() {
            wake |= self.with_shard(i, |_, s| s.take_upstream_wake());
        }
        wake
    }

    /// ReleaseCapacity: forgets the requester's leases on these resources,
    /// each in its shard. Returns how many were forgotten.
    fn release(&mut self, who: &Who, resource_ids: &[String]) -> Result<usize, Refusal> {
        if let [one] = resource_ids {
            let i = self.shard_index(one);
            return self.with_shard(i, |n, s| s.release(n, who, resource_ids));
        }
        let mut released = 0;
        for (i, ids) in by_shard(resource_ids, self.shard_count())
            .iter()
            .enumerate()
        {
            // An empty part still checks mastership (the answer to a
            // standby is a redirect).
            if !ids.is_empty() || i == 0 {
                released += self.with_shard(i, |n, s| s.release(n, who, ids))?;
            }
        }
        Ok(released)
    }

    /// The holders of `resource_id` a push pass at `now` looks at, and its
    /// generation (see [`ResourceShard::push_candidates`]), in its shard.
    fn push_candidates(
        &mut self,
        now: Time,
        resource_id: &str,
        seen: Option<u64>,
        limit: usize,
    ) -> Candidates {
        let i = self.shard_index(resource_id);
        self.with_shard(i, |n, s| {
            s.push_candidates(n, (now, resource_id), (seen, limit))
        })
    }

    /// A push pass over `holders` of `resource_id` at `now` (see
    /// [`ResourceShard::push`]), in its shard.
    fn push(
        &mut self,
        now: Time,
        resource_id: &str,
        holders: &[(Who, Option<Time>)],
        rule: &PushRule,
    ) -> Vec<Push> {
        let i = self.shard_index(resource_id);
        self.with_shard(i, |n, s| s.push(n, (now, resource_id), holders, rule))
    }

    /// The running config.
    fn config(&mut self) -> Arc<Config> {
        self.node(|n| n.config.clone())
    }

    /// True when this server is the master.
    fn is_master(&mut self) -> bool {
        self.node(Node::is_master)
    }

    /// The master's address as far as this server knows.
    fn master_address(&mut self) -> Option<String> {
        self.node(|n| n.master_address().map(str::to_string))
    }

    /// See [`Node::mastership_at`].
    fn mastership_at(&mut self, now: Time) -> (bool, Option<String>) {
        self.node(|n| n.mastership_at(now))
    }

    /// See [`Node::set_master_until`].
    fn set_master_until(&mut self, until: Option<Time>) {
        self.node_mut(|n| n.set_master_until(until));
    }

    /// See [`Node::become_master`].
    fn become_master(&mut self, now: Time) {
        self.node_mut(|n| n.become_master(now));
    }

    /// See [`Node::become_master_after`] and [`Node::set_lease_bound`]:
    /// the bound is set with the mastership, in one change.
    fn become_master_after(&mut self, now: Time, predecessors: Predecessors, bound: Option<Time>) {
        self.node_mut(|n| {
            n.set_lease_bound(bound);
            n.become_master_after(now, predecessors);
        });
    }

    /// See [`Node::step_down`].
    fn step_down(&mut self, master: Option<String>) {
        self.node_mut(|n| n.step_down(master));
    }

    /// See [`Node::set_master_address`].
    fn set_master_address(&mut self, master: Option<String>) {
        self.node_mut(|n| n.set_master_address(master));
    }

    /// See [`Node::wait_for_config`].
    fn wait_for_config(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        self.node_mut(|n| n.wait_for_config(reason));
    }

    /// True while the server waits for its first config.
    fn waiting_for_config(&mut self) -> bool {
        self.node(Node::waiting_for_config)
    }

    /// See [`Node::replace_config`]. Returns the old config, to be
    /// dropped by the caller outside any lock.
    fn replace_config(&mut self, config: Arc<Config>) -> Arc<Config> {
        self.node_mut(|n| n.replace_config(config))
    }

    /// The lease bound.
    fn lease_bound(&mut self) -> Option<Time> {
        self.node(Node::lease_bound)
    }

    /// See [`Node::set_lease_bound`].
    fn set_lease_bound(&mut self, bound: Option<Time>) {
        self.node_mut(|n| n.set_lease_bound(bound));
    }

    /// What every shard has seen of the parent, together.
    fn upstream_reach(&mut self) -> UpstreamReach {
        (0..self.shard_count())
            .map(|i| self.with_shard(i, |_, s| s.upstream_reach()))
            .fold(UpstreamReach::default(), UpstreamReach::max)
    }

    /// See [`Node::horizon_due`], over what every shard has seen.
    fn horizon_due(&mut self, now: Time) -> Option<Time> {
        let reach = self.upstream_reach();
        self.node(|n| n.horizon_due(now, reach))
    }

    /// See [`Node::horizon_lead`].
    fn horizon_lead(&mut self) -> HorizonLead {
        self.node(Node::horizon_lead)
    }

    /// See [`Node::fresh_horizon`], over what every shard has seen.
    fn fresh_horizon(&mut self, now: Time) -> Time {
        let reach = self.upstream_reach();
        self.node(|n| n.fresh_horizon(now, reach))
    }

    /// Whether this server can serve right now, and if not, why: a root
    /// needs a config; a standby must know the master; an intermediate
    /// master must hold a valid lease from its parent for the resources
    /// its requesters use (over every shard).
    fn readiness(&mut self, now: Time) -> Result<(), NotReady> {
        if self.node(|n| n.readiness(now))?.is_none() {
            return Ok(());
        }
        let mut gap = self.with_shard(0, |_, s| s.lease_gap(now));
        for i in 1..self.shard_count() {
            gap.add(self.with_shard(i, |_, s| s.lease_gap(now)));
        }
        gap.verdict()
    }

    /// The counters, summed over the shards.
    fn counters(&mut self) -> Counters {
        let mut sum = Counters::default();
        for i in 0..self.shard_count() {
            let c = self.with_shard(i, |_, s| s.counters());
            sum.unmatched_requests += c.unmatched_requests;
            sum.expired_leases += c.expired_leases;
        }
        sum
    }

    /// Number of resources with state.
    fn resource_count(&mut self) -> usize {
        (0..self.shard_count())
            .map(|i| self.with_shard(i, |_, s| s.resource_count()))
            .sum()
    }

    /// Number of live leases over all resources.
    fn lease_count(&mut self) -> usize {
        (0..self.shard_count())
            .map(|i| self.with_shard(i, |_, s| s.lease_count()))
            .sum()
    }

    /// Runs a step-wise whole-server pass (`cleanup_step`, `status_step`,
    /// `gauges_step`) over every shard, one access per step.
    fn sweep(&mut self, mut step: impl FnMut(&Node, &mut ResourceShard, usize) -> Option<usize>) {
        for i in 0..self.shard_count() {
            whole_pass(|from| self.with_shard(i, |n, s| step(n, s, from)));
        }
    }

    /// Everything of a status but the resources (see
    /// [`Node::status_header`]), with counters over all shards.
    fn status_header(&mut self, now: Time) -> Status {
        let mut status = self.node(|n| n.status_header(now));
        status.unmatched_requests = self.counters().unmatched_requests;
        status
    }

    /// A whole status in one call (tests and tools), listing at most
    /// `max_leases` leases per resource.
    fn status(&mut self, now: Time, max_leases: usize) -> Status {
        let mut status = self.status_header(now);
        let resources = &mut status.resources;
        self.sweep(|n, s, from| s.status_step(n, now, max_leases, from, resources));
        status.finish();
        status
    }

    /// A whole cleanup pass, step by step.
    fn cleanup(&mut self, now: Time) {
        self.sweep(|n, s, from| s.cleanup_step(n, now, from));
    }

    /// When the upstream task should next wake: the earliest shard's.
    fn next_upstream_wakeup(&mut self) -> Option<Time> {
        (0..self.shard_count())
            .filter_map(|i| self.with_shard(i, |n, s| s.next_upstream_wakeup(n)))
            .min()
    }

    /// If a resource with clients in any shard is due, one bulk request
    /// for every resource with clients that the minimum interval allows,
    /// from all shards, sorted by id.
    fn upstream_request(&mut self, now: Time) -> Option<Vec<UpstreamAsk>> {
        let due =
            (0..self.shard_count()).any(|i| self.with_shard(i, |n, s| s.upstream_due(n, now)));
        if !due {
            return None;
        }
        self.upstream_request_now(now)
    }

    /// One bulk request at `now` for every resource with clients that the
    /// minimum interval and a new master's hold allow, due or not, sorted
    /// by id: a node made to renew from its parent at a given moment (the
    /// simulator replaying when a real tree's nodes asked, `doorman-sim
    /// run --replay-asks`). Marks them sent, as [`Sharded::upstream_request`]
    /// does.
    fn upstream_request_now(&mut self, now: Time) -> Option<Vec<UpstreamAsk>> {
        let mut asks = Vec::new();
        for i in 0..self.shard_count() {
            asks.extend(self.with_shard(i, |n, s| s.upstream_asks(n, now)));
        }
        asks.sort_by(|a, b| a.resource_id.cmp(&b.resource_id));
        (!asks.is_empty()).then_some(asks)
    }

    /// Applies the parent's answer to a request for `requested`; each
    /// shard gets its part.
    fn upstream_response(&mut self, now: Time, requested: &[String], grants: &[UpstreamGrant]) {
        let count = self.shard_count();
        let ids = by_shard(requested, count);
        let mut parts = vec![Vec::new(); count];
        for g in grants {
            parts[shard_of(&g.resource_id, count)].push(g.clone());
        }
        for (i, (ids, grants)) in ids.iter().zip(&parts).enumerate() {
            if !ids.is_empty() || !grants.is_empty() {
                self.with_shard(i, |n, s| s.upstream_response(n, now, ids, grants));
            }
        }
    }

    /// The parent pushed `grants` (see [`ResourceShard::upstream_push`]);
    /// returns the resources whose capacity moved.
    fn upstream_push(
        &mut self,
        now: Time,
        (grants, asking): (&[UpstreamGrant], bool),
    ) -> Vec<String> {
        let count = self.shard_count();
        let mut moved = Vec::new();
        for g in grants {
            let i = shard_of(&g.resource_id, count);
            let one = std::slice::from_ref(g);
            moved.extend(self.with_shard(i, |n, s| s.upstream_push(n, now, (one, asking))));
        }
        moved
    }

    /// The request for `requested` failed at `now`; try again after the
    /// `backoff` delay (see [`ResourceShard::upstream_failure`]).
    fn upstream_failure(&mut self, now: Time, requested: &[String], backoff: Span) {
        let ids = by_shard(requested, self.shard_count());
        for (i, ids) in ids.iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            self.with_shard(i, |_, s| s.upstream_failure(now, ids, backoff));
        }
    }
}

impl<A: ShardAccess + ?Sized> Sharded for A {}

/// `ids` grouped by the shard each lives in (one list per shard).
fn by_shard(ids: &[String], shards: usize) -> Vec<Vec<String>> {
    let mut parts = vec![Vec::new(); shards];
    for id in ids {
        parts[shard_of(id, shards)].push(id.clone());
    }
    parts
}

/// [`Sharded::decide`], taking the touched shards' wake flags when `take`.
fn decide_request<A: Sharded + ?Sized>(
    a: &mut A,
    now: Time,
    req: &CapacityRequest,
    take: bool,
) -> Decided {
    let (mut wake, mut moved) = (false, false);
    let mut step = |a: &mut A, i: usize, asks: &[ResourceAsk]| {
        a.with_shard(i, |n, s| {
            let grants = s.decide_asks(n, now, &req.who, asks);
            wake |= take && s.take_upstream_wake();
            moved |= s.take_moved();
            grants
        })
    };
    let grants = match &req.resources[..] {
        // An empty request is still decided once: its answer may be a
        // refusal (not the master: a redirect).
        [] => step(a, 0, &[]),
        [one] => {
            let i = a.shard_index(&one.resource_id);
            step(a, i, std::slice::from_ref(one))
        }
        many => decide_parts(a, many, &mut step),
    };
    Decided {
        grants,
        wake_upstream: wake,
        moved,
    }
}

/// A request of several resources: grouped by shard, decided part by
/// part, answered in request order.
fn decide_parts<A: Sharded + ?Sized>(
    a: &mut A,
    asks: &[ResourceAsk],
    step: &mut impl FnMut(&mut A, usize, &[ResourceAsk]) -> Result<Vec<Grant>, Refusal>,
) -> Result<Vec<Grant>, Refusal> {
    let count = a.shard_count();
    let home: Vec<usize> = asks
        .iter()
        .map(|x| shard_of(&x.resource_id, count))
        .collect();
    let mut answers = Vec::with_capacity(count);
    for i in 0..count {
        let part: Vec<ResourceAsk> = (asks.iter().zip(&home))
            .filter(|(_, h)| **h == i)
            .map(|(x, _)| x.clone())
            .collect();
        let mut grants = Vec::with_capacity(part.len());
        for chunk in part.chunks(DECIDE_STEP) {
            grants.extend(step(a, i, chunk)?);
        }
        answers.push(grants.into_iter().peekable());
    }
    // Each part keeps its order; a resource left unanswered (pending
    // upstream) is missing from its part.
    let mut out = Vec::with_capacity(asks.len());
    for (ask, h) in asks.iter().zip(&home) {
        if let Some(g) = answers[*h].next_if(|g| g.resource_id == ask.resource_id) {
            out.push(g);
        }
    }
    Ok(out)
}
