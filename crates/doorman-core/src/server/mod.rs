//! The lease server's core: a synchronous state machine that never reads a
//! clock, sleeps or touches a socket. Every entry point takes `now`.
//!
//! It owns the per-resource state, mastership (from the core's point of
//! view: am I master, since when, who is), learning mode, cleanup and the
//! current config. The gRPC service, the election task and the config
//! watcher are thin adapters that call it with the real time; tests and the
//! simulation call it with virtual time.
//!
//! Must not: do I/O, read the clock, or panic on anything a request or a
//! config can contain.

mod absent;
mod deadlines;
mod decide;
mod grants;
mod horizon;
mod index;
mod office;
mod record;
mod reload;
mod request;
mod resource;
mod shards;
mod status;
mod sweep;
mod upstream;

use std::sync::Arc;

use indexmap::IndexMap;

use doorman_algorithms::Time;

pub use horizon::{
    HorizonLead, Predecessors, HORIZON_AHEAD, HORIZON_CLOCK_MARGIN, HORIZON_RENEW_BEFORE,
    INTERMEDIATE_LEAD, ROOT_LEAD,
};
pub use office::{take_office, HorizonRecord, Office, PLAUSIBLE_AHEAD};
pub use request::{
    CapacityRequest, Claim, Decision, Grant, GrantNote, NotMaster, Refusal, ResourceAsk, Who,
};
use resource::{Context, Resource};
pub use shards::{default_shards, Decided, ShardedCore};
pub use status::{
    BandStatus, LeaseStatus, LinkStatus, ResourceGauge, ResourceStatus, Status, TemplateStatus,
    UpstreamGauge, UpstreamStatus,
};
pub use sweep::{whole_pass, DECIDE_STEP, STATUS_STEP, SWEEP_STEP};
pub use upstream::{UpstreamAsk, UpstreamGrant, MIN_UPSTREAM_INTERVAL, PENDING_LEARNING};

use crate::config::{AlgorithmConfig, Config};

/// Where a server's capacity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// The root: capacity from the config.
    #[default]
    Root,
    /// Below the root: capacity leased from a parent.
    Intermediate,
}

/// Settings of a core.
#[derive(Debug, Clone)]
pub struct CoreOptions {
    /// Root or intermediate.
    pub role: Role,
    /// This server's id: what Discovery returns as the master address.
    pub server_id: String,
    /// A repeat request from the same requester for the same resource
    /// inside this interval gets the lease it holds without a new decision
    /// (`Time::ZERO` disables).
    pub min_request_interval: Time,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            role: Role::Root,
            server_id: "doorman".into(),
            min_request_interval: Time::secs(1),
        }
    }
}

/// Counters the core keeps (exported as metrics by the adapters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Resource requests no template matched.
    pub unmatched_requests: u64,
    /// Leases removed because they expired.
    pub expired_leases: u64,
}

/// A master's resources in use without a valid upstream lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseGap {
    cut_off: usize,
    learning: bool,
}

impl LeaseGap {
    fn add(&mut self, other: LeaseGap) {
        self.cut_off += other.cut_off;
        self.learning |= other.learning;
    }

    /// Not ready while resources in use have no upstream lease, unless
    /// some resource is still learning.
    fn verdict(self) -> Result<(), String> {
        if self.cut_off > 0 && !self.learning {
            return Err(format!(
                "no valid lease from the parent for {} resource(s) in use",
                self.cut_off
            ));
        }
        Ok(())
    }
}

/// The lease server core.
#[derive(Debug)]
pub struct ServerCore {
    opts: CoreOptions,
    config: Arc<Config>,
    /// Bumped by each reload; resources bound to an older one re-bind when
    /// next touched (`reload.rs`).
    config_gen: u64,
    /// In insertion order with O(1) removal (`swap_remove`), so whole-server
    /// work can go in bounded steps by position (`sweep.rs`).
    resources: IndexMap<String, Resource>,
    is_master: bool,
    /// Mastership is proven only until then (an election's lease, which
    /// a successor cannot win before it ends); `None`: for good (a
    /// standalone server).
    master_until: Option<Time>,
    master_address: Option<String>,
    master_since: Time,
    /// What this master knows about its predecessors' leases (`horizon.rs`).
    predecessors: Predecessors,
    /// No lease handed out expires after this (`horizon.rs`).
    lease_bound: Option<Time>,
    /// The longest `lease_length` a parent has sent, seconds.
    longest_parent_lease: i64,
    /// The latest expiry of any lease this master got from its parent.
    latest_upstream_expiry: Time,
    /// The latest end of a claim this master echoed without a lease from
    /// its parent (an intermediate in learning mode).
    latest_echo_end: Time,
    counters: Counters,
    upstream_wake: bool,
    /// A root waiting for its first config: what it waits for.
    config_pending: Option<String>,
}

impl ServerCore {
    /// A core that is not (yet) master. Call [`ServerCore::become_master`]
    /// when the election is won (at once for a standalone server).
    pub fn new(opts: CoreOptions, config: Arc<Config>) -> Self {
        ServerCore {
            opts,
            config,
            config_gen: 0,
            resources: IndexMap::new(),
            is_master: false,
            master_until: None,
            master_address: None,
            master_since: Time::ZERO,
            predecessors: Predecessors::Unknown,
            lease_bound: None,
            longest_parent_lease: 0,
            latest_upstream_expiry: Time::ZERO,
            latest_echo_end: Time::ZERO,
            counters: Counters::default(),
            upstream_wake: false,
            config_pending: None,
        }
    }

    /// The options.
    pub fn options(&self) -> &CoreOptions {
        &self.opts
    }

    /// The running config.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// True when this server is the master (whether it can still prove
    /// it at a given time: [`ServerCore::mastership_at`]).
    pub fn is_master(&self) -> bool {
        self.is_master
    }

    /// This server can prove it is the master only until `until` (the end
    /// of its election lease as it knows it: a successor may be elected
    /// from then on); `None`: for good. Requests at or after it are
    /// refused as by a server that does not know the master, whatever the
    /// election task has noticed yet (a process paused past its lease,
    /// then resumed, answers before that task runs).
    pub fn set_master_until(&mut self, until: Option<Time>) {
        self.master_until = until;
    }

    /// Whether this server is the master at `now` as far as it can prove,
    /// and the master's address as far as it knows (its own id when it
    /// is; none once its proof has run out).
    pub fn mastership_at(&self, now: Time) -> (bool, Option<String>) {
        if self.proven_master(now) {
            return (true, Some(self.opts.server_id.clone()));
        }
        match self.is_master {
            true => (false, None),
            false => (false, self.master_address.clone()),
        }
    }

    /// Master, and still able to prove it at `now`.
    fn proven_master(&self, now: Time) -> bool {
        self.is_master && self.master_until.is_none_or(|u| now < u)
    }

    /// The master's address as far as this server knows (its own id when
    /// it is the master).
    pub fn master_address(&self) -> Option<&str> {
        if self.is_master {
            Some(&self.opts.server_id)
        } else {
            self.master_address.as_deref()
        }
    }

    /// This server won the election at `now`: fresh empty state, learning
    /// mode starts for every resource and lasts its full duration (nothing
    /// is known about the predecessors: see
    /// [`ServerCore::become_master_after`]).
    pub fn become_master(&mut self, now: Time) {
        self.resources.clear();
        self.is_master = true;
        self.master_address = None;
        self.master_since = now;
        self.predecessors = Predecessors::Unknown;
        self.latest_upstream_expiry = Time::ZERO;
        self.latest_echo_end = Time::ZERO;
    }

    /// This server is not (or no longer) the master: drop all lease state
    /// and redirect to `master` (unknown if `None`).
    pub fn step_down(&mut self, master: Option<String>) {
        self.resources.clear();
        self.is_master = false;
        self.master_address = master;
    }

    /// The master changed while this server is not master.
    pub fn set_master_address(&mut self, master: Option<String>) {
        if !self.is_master {
            self.master_address = master;
        }
    }

    /// Why a request cannot be answered, if it cannot: `master` says
    /// whether this server is the master for it (proven at the request's
    /// time for a grant; a release only forgets, so any master may).
    fn refusal(&self, master: bool) -> Option<Refusal> {
        if !master {
            // A master whose proof ran out does not know who is master now.
            let master_address = match self.is_master {
                true => None,
                false => self.master_address.clone(),
            };
            return Some(Refusal::NotMaster(NotMaster { master_address }));
        }
        self.config_pending.clone().map(Refusal::NoConfig)
    }

    /// A server that starts without the config it was given (its etcd key
    /// not pushed yet or etcd not answering, its file missing or empty)
    /// waits: every request is refused with `reason` until
    /// [`ServerCore::replace_config`] brings one. An intermediate waits too:
    /// the config may hold access rules, and serving without them would
    /// let anyone in (one started with no config at all never waits).
    pub fn wait_for_config(&mut self, reason: impl Into<String>) {
        self.config_pending = Some(reason.into());
    }

    /// True while the server waits for its first config.
    pub fn waiting_for_config(&self) -> bool {
        self.config_pending.is_some()
    }

    /// Whether this server can serve right now, and if not, why: a root
    /// needs a config; a standby must know the master; an intermediate
    /// master must hold a valid lease from its parent for the resources
    /// its requesters use.
    pub fn readiness(&self, now: Time) -> Result<(), String> {
        self.readiness_parts(now)?
            .map_or(Ok(()), |gap| gap.verdict())
    }

    /// [`ServerCore::readiness`] in parts: an error, ready (`None`), or a
    /// master's upstream leases to judge, which [`ShardedCore`] adds up
    /// over its shards before the verdict.
    pub(crate) fn readiness_parts(&self, now: Time) -> Result<Option<LeaseGap>, String> {
        if let Some(reason) = &self.config_pending {
            return Err(format!("no config yet: {reason}"));
        }
        if self.is_master && !self.proven_master(now) {
            return Err("the master's election lease may have run out".into());
        }
        if !self.is_master {
            return match &self.master_address {
                Some(_) => Ok(None),
                None => Err("not the master, and the master is unknown".into()),
            };
        }
        let cut_off = self
            .resources
            .values()
            .filter(|r| !r.shares.is_empty())
            .filter(|r| {
                r.upstream
                    .as_ref()
                    .is_some_and(|u| u.valid_lease(now).is_none())
            })
            .count();
        let learning = self.resources.values().any(|r| r.in_learning(now));
        Ok(Some(LeaseGap { cut_off, learning }))
    }

    /// GetCapacity / GetServerCapacity: for each resource, clean up, record
    /// the request, decide (learning mode or algorithm) and answer.
    pub fn get_capacity(
        &mut self,
        now: Time,
        req: &CapacityRequest,
    ) -> Result<Vec<Grant>, Refusal> {
        self.decide_asks(now, &req.who, &req.resources)
    }

    /// [`ServerCore::get_capacity`] for a part of a request (the shells
    /// decide large requests [`DECIDE_STEP`] resources at a time, taking
    /// the core's lock for each part only).
    pub fn decide_asks(
        &mut self,
        now: Time,
        who: &Who,
        asks: &[ResourceAsk],
    ) -> Result<Vec<Grant>, Refusal> {
        if let Some(refusal) = self.refusal(self.proven_master(now)) {
            return Err(refusal);
        }
        let mut out = Vec::with_capacity(asks.len());
        for ask in asks {
            let grant = self.one(now, who, ask);
            if grant.decision == Decision::Pending {
                tracing::debug!(
                    resource = %ask.resource_id, %who,
                    "claimed lease left unanswered until the parent's first answer"
                );
            } else {
                out.push(grant);
            }
        }
        Ok(out)
    }

    fn one(&mut self, now: Time, who: &Who, ask: &ResourceAsk) -> Grant {
        if let Some(r) = self.resources.get_mut(&ask.resource_id) {
            r.freshen(&self.config, self.config_gen, &ask.resource_id);
            if r.retired(now) {
                self.resources.swap_remove(&ask.resource_id);
            }
        }
        let cx = Context {
            now,
            min_request_interval: self.opts.min_request_interval,
            learning: self.learning_clock(),
            lease_bound: self.lease_bound,
            vouched: !self.config.acl().is_empty(),
        };
        let resource = match self.resources.get_mut(&ask.resource_id) {
            Some(r) => r,
            None if self.opts.role == Role::Intermediate => {
                let local = self.config.find(&ask.resource_id).cloned();
                let mut r = Resource::new_intermediate(&ask.resource_id, local, cx.learning, now);
                r.config_gen = self.config_gen;
                self.resources.entry(ask.resource_id.clone()).or_insert(r)
            }
            None => {
                let Some(template) = self.config.find(&ask.resource_id).cloned() else {
                    return self.unmatched(now, who, ask);
                };
                let learning_until = cx
                    .learning
                    .end(Time::secs(template.algorithm.learning_mode_duration));
                let capacity = template.capacity;
                let mut r = Resource::new(template, capacity, learning_until);
                r.config_gen = self.config_gen;
                self.resources.entry(ask.resource_id.clone()).or_insert(r)
            }
        };
        let min = self.opts.min_request_interval;
        self.counters.expired_leases += resource.expire(now, min) as u64;
        // An intermediate resource without requesters (new, or all gone) is
        // not being renewed upstream: ask at once.
        if resource.upstream.is_some() && resource.shares.is_empty() {
            self.upstream_wake = true;
        }
        resource.sync_capacity(now);
        let due_before = resource.upstream_due();
        let mut grant = resource.request(&cx, who, ask);
        grant.note = resource.note(now, grant.decision);
        self.upstream_wake |= resource.ask_parent_now(now, due_before);
        let echoed = grant.decision == Decision::Learning && grant.lease.capacity > 0.0;
        if echoed && resource.upstream.is_some() {
            self.note_echo(grant.lease.expiry);
        }
        grant
    }

    fn unmatched(&mut self, now: Time, who: &Who, ask: &request::ResourceAsk) -> Grant {
        self.counters.unmatched_requests += 1;
        tracing::warn!(
            resource = %ask.resource_id, %who,
            "no template matches this resource; granting what was asked for"
        );
        let algorithm = AlgorithmConfig::unmatched();
        let wants: f64 = ask.demands.iter().map(|d| d.wants()).sum();
        Grant {
            resource_id: ask.resource_id.clone(),
            lease: algorithm.terms().lease(now, 0, None, wants),
            at: now,
            safe_capacity: wants,
            algorithm,
            algorithm_known: true,
            decision: Decision::Unmatched,
            note: None,
            next_refresh_interval: None,
            predecessor_out: None,
            predecessor_until: None,
        }
    }

    /// ReleaseCapacity: forget the requester's leases on these resources.
    /// Returns how many leases were forgotten.
    pub fn release(&mut self, who: &Who, resource_ids: &[String]) -> Result<usize, Refusal> {
        if let Some(refusal) = self.refusal(self.is_master) {
            return Err(refusal);
        }
        let mut n = 0;
        for id in resource_ids {
            if let Some(r) = self.resources.get_mut(id) {
                n += usize::from(r.release(who));
            }
        }
        Ok(n)
    }

    /// Number of resources with state.
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Number of live leases over all resources.
    pub fn lease_count(&self) -> usize {
        self.resources.values().map(|r| r.shares.len()).sum()
    }

    /// The current lease of a requester, if any.
    #[cfg(test)]
    pub(crate) fn lease_of(
        &self,
        resource_id: &str,
        who: &Who,
    ) -> Option<doorman_algorithms::Lease> {
        let r = self.resources.get(resource_id)?;
        r.held_lease(r.index.get(&r.shares, who)?)
    }
}

#[cfg(test)]
mod tests;
