//! One shard of a lease server's resources: the resource table and what
//! follows from it (counters, the upstream wake flag, what the parent's
//! leases reach). A server files every resource in exactly one shard
//! (`sharded.rs`); each method takes the node-wide state by reference.
//!
//! A shard starts every term of the node empty: before any use it is
//! brought up to the node's term ([`ResourceShard::sync`]), which drops
//! what a change of mastership drops.
//!
//! Must not: hold node-wide state (mastership, config), or read a clock.

use indexmap::IndexMap;

use doorman_lease::{Span, Time};

use super::push::{Candidates, Push, PushRule};
use super::resource::{Context, Resource};
use super::{Counters, Decision, Grant, LeaseGap, Node, Refusal, ResourceAsk, Role, Who};
use crate::config::AlgorithmConfig;

/// A shard's resources.
#[derive(Debug, Default)]
pub struct ResourceShard {
    /// In insertion order with O(1) removal (`swap_remove`), so whole-server
    /// work can go in bounded steps by position (`sweep.rs`).
    pub(crate) resources: IndexMap<String, Resource>,
    /// The longest `lease_length` a parent has sent, seconds.
    pub(crate) longest_parent_lease: i64,
    /// The latest expiry of any lease this master got from its parent.
    pub(crate) latest_upstream_expiry: Time,
    /// The latest end of a claim this master echoed without a lease from
    /// its parent (an intermediate in learning mode).
    pub(crate) latest_echo_end: Time,
    pub(crate) counters: Counters,
    pub(crate) upstream_wake: bool,
    /// A decision since the last [`ResourceShard::take_moved`] changed
    /// what someone would get (a resource's `Shares::generation` moved).
    moved: bool,
    /// The node's term this shard's tables belong to.
    term: u64,
}

impl ResourceShard {
    /// Brings the shard up to the node's term: a new master (or one that
    /// stepped down) starts from empty tables.
    pub fn sync(&mut self, node: &Node) {
        if self.term != node.term {
            self.term = node.term;
            self.resources.clear();
            self.latest_upstream_expiry = Time::ZERO;
            self.latest_echo_end = Time::ZERO;
        }
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Number of resources with state.
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Number of live leases over all resources.
    pub fn lease_count(&self) -> usize {
        self.resources.values().map(|r| r.shares.len()).sum()
    }

    /// True (once) when a new resource appeared that the parent should be
    /// asked about at once.
    pub fn take_upstream_wake(&mut self) -> bool {
        std::mem::take(&mut self.upstream_wake)
    }

    /// True (once) when a decision changed what someone would get.
    pub fn take_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    /// Decides `asks` (resources of this shard) for `who` at `now`: for
    /// each, clean up, record the request, decide (learning mode or
    /// algorithm) and answer. A resource left pending upstream is left out.
    pub fn decide_asks(
        &mut self,
        node: &Node,
        now: Time,
        who: &Who,
        asks: &[ResourceAsk],
    ) -> Result<Vec<Grant>, Refusal> {
        if let Some(refusal) = node.refusal(node.proven_master(now)) {
            return Err(refusal);
        }
        let mut out = Vec::with_capacity(asks.len());
        for ask in asks {
            let grant = self.one(node, now, who, ask);
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

    fn one(&mut self, node: &Node, now: Time, who: &Who, ask: &ResourceAsk) -> Grant {
        if let Some(r) = self.resources.get_mut(&ask.resource_id) {
            r.freshen(&node.config, node.config_gen, &ask.resource_id);
            if r.retired(now) {
                self.resources.swap_remove(&ask.resource_id);
            }
        }
        let cx = self.context(node, now);
        let Some(resource) = resource_for(&mut self.resources, node, &cx, &ask.resource_id) else {
            return self.unmatched(now, who, ask);
        };
        let generation = resource.shares.generation();
        self.counters.expired_leases += resource.expire(now, cx.min_request_interval) as u64;
        // An intermediate resource without requesters (new, or all gone) is
        // not being renewed upstream: ask at once.
        let mut wake = resource.upstream.is_some() && resource.shares.is_empty();
        resource.sync_capacity(now);
        let due_before = resource.upstream_due();
        let mut grant = resource.request(&cx, who, ask);
        self.moved |= resource.shares.generation() != generation;
        grant.note = resource.note(now, grant.decision);
        wake |= resource.ask_parent_now(now, due_before);
        let echoed = grant.decision == Decision::Learning && grant.lease.capacity > 0.0;
        if echoed && resource.upstream.is_some() {
            self.note_echo(grant.lease.expiry);
        }
        self.upstream_wake |= wake;
        grant
    }

    /// The first half of a push pass over `resource_id` at `now`: up to
    /// `limit` of the holders whose grant may differ from what they would
    /// get now (`Shares::take_movers`, so a pass costs what moved, not
    /// every holder, and no more than its budget), and the resource's
    /// generation (`Shares::generation`). Nobody unless this server is the
    /// proven master and the resource is live here, or when its generation
    /// is still `seen` (nothing moved since that pass).
    pub fn push_candidates(
        &mut self,
        node: &Node,
        (now, resource_id): (Time, &str),
        (seen, limit): (Option<u64>, usize),
    ) -> Candidates {
        let Some((r, cx)) = self.pushing(node, now, resource_id) else {
            return Candidates::default();
        };
        let generation = Some(r.shares.generation());
        if seen == generation {
            return Candidates {
                generation,
                ..Candidates::default()
            };
        }
        Candidates {
            generation,
            ..r.push_candidates(&cx, limit)
        }
    }

    /// The second half: what each of `holders` (each with when it was last
    /// pushed to) is due now (`push.rs`), in order.
    pub fn push(
        &mut self,
        node: &Node,
        (now, resource_id): (Time, &str),
        holders: &[(Who, Option<Time>)],
        rule: &PushRule,
    ) -> Vec<Push> {
        let Some((r, cx)) = self.pushing(node, now, resource_id) else {
            return vec![Push::Nothing; holders.len()];
        };
        holders
            .iter()
            .map(|(who, last)| r.push(&cx, (resource_id, who), *last, rule))
            .collect()
    }

    /// The resource a push pass looks at, brought up to `now`, if this
    /// server is the proven master and the resource is live here.
    fn pushing(
        &mut self,
        node: &Node,
        now: Time,
        resource_id: &str,
    ) -> Option<(&mut Resource, Context)> {
        if node.refusal(node.proven_master(now)).is_some() {
            return None;
        }
        let cx = self.context(node, now);
        let r = self.resources.get_mut(resource_id)?;
        r.freshen(&node.config, node.config_gen, resource_id);
        self.counters.expired_leases += r.expire(now, cx.min_request_interval) as u64;
        r.sync_capacity(now);
        Some((r, cx))
    }

    /// What a decision at `now` needs of the node.
    fn context(&self, node: &Node, now: Time) -> Context {
        Context {
            now,
            min_request_interval: node.opts.min_request_interval,
            learning: node.learning_clock(),
            lease_bound: node.lease_bound,
            vouched: !node.config.acl().is_empty(),
        }
    }

    fn unmatched(&mut self, now: Time, who: &Who, ask: &ResourceAsk) -> Grant {
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
            shadow: false,
            note: None,
            next_refresh_interval: None,
            predecessor_out: None,
            predecessor_until: None,
        }
    }

    /// ReleaseCapacity: forget the requester's leases on these resources
    /// (of this shard). Returns how many leases were forgotten.
    pub fn release(
        &mut self,
        node: &Node,
        who: &Who,
        resource_ids: &[String],
    ) -> Result<usize, Refusal> {
        if let Some(refusal) = node.refusal(node.is_master) {
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

    /// A master's resources in use without a valid upstream lease (for
    /// readiness, added up over the shards).
    pub(crate) fn lease_gap(&self, now: Time) -> LeaseGap {
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
        LeaseGap { cut_off, learning }
    }

    /// The current lease of a requester, if any.
    #[cfg(test)]
    pub(crate) fn lease_of(&self, resource_id: &str, who: &Who) -> Option<doorman_lease::Lease> {
        let r = self.resources.get(resource_id)?;
        r.held_lease(r.index.get(&r.shares, who)?)
    }
}

/// The resource `id`, created if a template (or, on an intermediate,
/// the parent) serves it; `None` when no template matches on a root.
fn resource_for<'a>(
    resources: &'a mut IndexMap<String, Resource>,
    node: &Node,
    cx: &Context,
    id: &str,
) -> Option<&'a mut Resource> {
    if !resources.contains_key(id) {
        let mut r = if node.opts.role == Role::Intermediate {
            let local = node.config.find(id).cloned();
            let shadow_all = node.config.shadows_all();
            Resource::new_intermediate(id, (local, shadow_all), cx.learning, cx.now)
        } else {
            let template = node.config.find(id)?.clone();
            let learning_until = cx
                .learning
                .end(Span::secs(template.algorithm.learning_mode_duration));
            let capacity = template.capacity;
            Resource::new(template, capacity, learning_until)
        };
        r.config_gen = node.config_gen;
        resources.insert(id.to_string(), r);
    }
    resources.get_mut(id)
}
