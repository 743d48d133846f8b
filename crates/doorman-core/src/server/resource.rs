//! The state of one resource on one server: its template, the sharing state
//! (demands and grants, in `doorman_algorithms::Shares`), each requester's
//! lease record, an expiry index for cleanup, and the learning-mode end.
//!
//! Must not: read a clock or know about protobufs.

use std::sync::Arc;

use doorman_algorithms::{RequesterId, Shares};
use doorman_lease::{Amount, Lease, Span, Time};

use super::counts::ServerCounts;
use super::deadlines::{for_due, is_due, Deadlines};
use super::horizon::LearningClock;
use super::index::Index;
use super::record::{lowered_ended, Record};
use super::request::{Decision, GrantNote, UpstreamAsk, Who};
use super::upstream::{aggregate_bands, keep_while_learning, UpstreamState, MIN_UPSTREAM_INTERVAL};
use crate::config::{Config, Template};
use crate::limits::MAX_AMOUNT;

/// One resource.
#[derive(Debug)]
pub(crate) struct Resource {
    pub template: Arc<Template>,
    pub shares: Shares<Record>,
    pub index: Index,
    /// One key per requester (`Record::expiry_key`), at or before the time
    /// it may be forgotten (`Record::forget_at`); see [`Resource::expire`].
    pub expiries: Deadlines,
    /// One key per requester not yet absent (`Record::absent_at`), at or
    /// before the time it counts as absent (`absent.rs`).
    pub absent: Deadlines,
    pub learning_until: Time,
    /// Present on intermediate servers: the capacity comes from the parent.
    pub upstream: Option<UpstreamState>,
    /// Set when a config reload removed the resource's template while
    /// leases were live: the old template keeps applying, and no lease
    /// outlives, until then (the latest expiry of those leases).
    pub retired_until: Option<Time>,
    /// The generation of the config it is bound to (see `reload.rs`).
    pub config_gen: u64,
    /// What its downstream servers claim and count for (`open_share.rs`).
    pub servers: ServerCounts,
}

/// Settings the core passes to each request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub now: Time,
    pub min_request_interval: Span,
    /// When this server became master, and when its learning ends.
    pub learning: LearningClock,
    /// No lease outlives this (see `horizon.rs`).
    pub lease_bound: Option<Time>,
    /// Access rules name who may serve: a downstream server's client count
    /// is trusted (up to `max_clients_per_server`); else it is bounded by
    /// the template's `open_server_share` too.
    pub vouched: bool,
}

pub(super) fn amount(x: f64) -> Amount {
    // Values reaching here are results of validated inputs; clamp defensively.
    Amount::new("capacity", if x.is_finite() { x.max(0.0) } else { 0.0 }).unwrap_or(Amount::ZERO)
}

impl Resource {
    /// A resource of the root, bound to its template.
    pub fn new(template: Arc<Template>, capacity: f64, learning_until: Time) -> Self {
        Resource {
            shares: Shares::new(template.algorithm.kind, amount(capacity)),
            template,
            index: Index::default(),
            expiries: Deadlines::new(),
            absent: Deadlines::new(),
            learning_until,
            upstream: None,
            retired_until: None,
            config_gen: 0,
            servers: ServerCounts::default(),
        }
    }

    /// A resource of an intermediate server, waiting for the parent.
    pub fn new_intermediate(
        resource_id: &str,
        (local, shadow_all): (Option<Arc<Template>>, bool),
        learning: LearningClock,
        now: Time,
    ) -> Self {
        let up = UpstreamState::new(local, shadow_all, now);
        let learning_until = learning.end(up.learning_duration());
        let mut r = Resource::new(up.template(resource_id), 0.0, learning_until);
        r.upstream = Some(up);
        r
    }

    /// Re-derives the template and capacity from the upstream state
    /// (after a parent's answer or a config change).
    pub fn refresh_upstream(&mut self, now: Time, resource_id: &str) {
        self.rebind_upstream(resource_id);
        self.sync_capacity(now);
    }

    /// Re-derives the template from the upstream state (capacity follows at
    /// the next request).
    pub fn rebind_upstream(&mut self, resource_id: &str) {
        if let Some(u) = &self.upstream {
            let t = u.template(resource_id);
            self.rebind(t);
        }
    }

    /// Intermediate servers: the capacity is the unexpired upstream grant.
    pub fn sync_capacity(&mut self, now: Time) {
        if let Some(u) = &self.upstream {
            let c = u.capacity(now);
            self.set_capacity(c);
        }
    }

    /// How long a lease of `capacity` may last: never past the master's
    /// lease bound (`horizon.rs`) or the upstream lease. Without an
    /// upstream lease the capacity is 0 and a lease ends at once, but for
    /// a claim echoed in learning mode (`claim_end`: when the claimed
    /// lease ends), which lasts no longer than the claim (the parent
    /// counts the predecessor's lease behind it only that long) nor than
    /// learning mode.
    pub(super) fn lease_cap(
        &self,
        cx: &Context,
        capacity: f64,
        claim_end: Option<Time>,
    ) -> Option<Time> {
        let own = self.own_lease_cap(cx.now, capacity, claim_end);
        match (own, cx.lease_bound) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn own_lease_cap(&self, now: Time, capacity: f64, claim_end: Option<Time>) -> Option<Time> {
        if let Some(until) = self.retired_until {
            return Some(until);
        }
        let u = self.upstream.as_ref()?;
        let echo = claim_end.filter(|_| capacity > 0.0 && self.in_learning(now));
        Some(match (u.valid_lease(now), echo) {
            (Some(l), _) => l.expiry,
            (None, Some(end)) => end.min(self.learning_until).max(now),
            (None, None) => now,
        })
    }

    /// Re-binds the resource to `config` (generation `gen`) unless it
    /// already is (see `reload.rs`). On an intermediate server the local
    /// config only narrows what the parent grants. On a root a resource
    /// that lost its template retires: it is dropped (by whoever finds
    /// [`Resource::retired`]) once its last live lease has expired, or at
    /// once if none is live.
    pub fn freshen(&mut self, config: &Config, gen: u64, id: &str) {
        if self.config_gen == gen {
            return;
        }
        self.config_gen = gen;
        if let Some(u) = self.upstream.as_mut() {
            u.local = config.find(id).cloned();
            u.shadow_all = config.shadows_all();
            self.rebind_upstream(id);
            return;
        }
        match config.find(id) {
            Some(t) => {
                self.retired_until = None;
                self.rebind(t.clone());
                self.set_capacity(t.capacity);
            }
            None => {
                if !self.retire() {
                    self.retired_until = Some(Time::ZERO);
                }
            }
        }
    }

    /// The config no longer has a template for this resource: keep it, and
    /// its leases counting against the old capacity, until the last live
    /// lease expires; false when no lease is live (drop it now).
    pub fn retire(&mut self) -> bool {
        // The index's keys may be earlier than the ends (`expire`): ask
        // the records. O(requesters), once per retirement.
        let shares = &self.shares;
        let last = shares
            .ids()
            .filter_map(|id| shares.get(id))
            .map(Record::forget_at)
            .max();
        let Some(last) = last else {
            return false;
        };
        self.retired_until = Some(last);
        true
    }

    /// True once a retired resource's last lease has expired.
    pub fn retired(&self, now: Time) -> bool {
        self.retired_until.is_some_and(|until| now >= until)
    }

    /// What to tell a requester about a grant decided as `decision`.
    pub fn note(&self, now: Time, decision: Decision) -> Option<GrantNote> {
        let waiting = self
            .upstream
            .as_ref()
            .is_some_and(|u| u.valid_lease(now).is_none());
        match decision {
            Decision::Algorithm | Decision::Unmatched => None,
            Decision::Pending => Some(GrantNote::WaitingForParent),
            // Learning, or a repeat of a lease decided while learning.
            _ if waiting => Some(GrantNote::WaitingForParent),
            _ if self.in_learning(now) => Some(GrantNote::Learning {
                seconds_left: (self.learning_until - now).as_secs_f64().max(0.0),
            }),
            _ => None,
        }
    }

    /// When this intermediate resource's next request to the parent is due.
    pub fn upstream_due(&self) -> Option<Time> {
        self.upstream.as_ref().map(UpstreamState::due)
    }

    /// After a request: true if the parent should be asked now: a claim
    /// brought a new master's held first request forward (it was due at
    /// `due_before`), the demand moved, or the outstanding settled.
    pub fn ask_parent_now(&mut self, now: Time, due_before: Option<Time>) -> bool {
        let due = self.upstream_due();
        let forward = matches!((due_before, due), (Some(b), Some(a)) if a < b);
        let learning = self.in_learning(now);
        let totals = self.shares.totals();
        let Some(u) = self.upstream.as_mut() else {
            return false;
        };
        let report =
            u.demand_moved(now, totals.wants, learning) || u.outstanding_settled(now, totals.taken);
        forward | (report && u.schedule.expedite(now))
    }

    /// The level whose refresh interval this resource hands out: the root
    /// (0) its template's, an intermediate (1) its own lease's scaled once.
    pub fn level(&self) -> u32 {
        u32::from(self.upstream.is_some())
    }

    /// True while claims are echoed (learning mode).
    pub fn in_learning(&self, now: Time) -> bool {
        now < self.learning_until
    }

    /// Points the resource at a new template (config reload); leases kept.
    pub fn rebind(&mut self, template: Arc<Template>) {
        self.shares.set_kind(template.algorithm.kind);
        self.template = template;
    }

    /// Whether keys of either index are due at `now` beyond what one
    /// [`Resource::expire`] handled (none in learning mode, which handles
    /// none).
    pub fn keys_due(&self, now: Time) -> bool {
        !self.in_learning(now) && (is_due(&self.expiries, now) || is_due(&self.absent, now))
    }

    /// The capacity shared from now on.
    pub fn set_capacity(&mut self, capacity: f64) {
        self.shares.set_capacity(amount(capacity));
    }

    /// Forgets the leases that expired at or before `now` (and stops
    /// counting the higher leases of lowered grants that ended: `lowered.rs`), and caps the
    /// demand of requesters that have become absent (`absent.rs`), unless
    /// the resource is in learning mode (`deadlines::for_due`); at most
    /// [`KEYS_PER_CALL`](super::deadlines::KEYS_PER_CALL) keys of each
    /// index, so one call (under a shard lock, before a request) is
    /// bounded: when more are due (a mass expiry; the first call after
    /// learning mode, which re-files nothing), the following calls go on
    /// where it stopped, and a record is forgotten or capped that much
    /// later, never earlier. Cost: O(KEYS_PER_CALL · log n).
    pub fn expire(&mut self, now: Time, min_request_interval: Span) -> usize {
        if self.in_learning(now) {
            return 0;
        }
        let mut n = 0;
        let index = &mut self.index;
        let servers = &mut self.servers;
        let key_of: fn(&mut Record) -> &mut Time = |r| &mut r.expiry_key;
        for_due(
            &mut self.expiries,
            &mut self.shares,
            now,
            key_of,
            Record::due,
            |shares, id| {
                if let Some(next) = lowered_ended(shares, id, now) {
                    return Some(next);
                }
                if let Some(who) = shares.get(id).map(|r| r.who.clone()) {
                    index.remove(&who, id);
                    servers.forget(shares, id);
                    shares.remove(id);
                    n += 1;
                }
                None
            },
        );
        self.mark_absent(now, min_request_interval);
        n
    }

    /// Forgets one requester (ReleaseCapacity).
    pub fn release(&mut self, who: &Who) -> bool {
        let Some(id) = self.index.get(&self.shares, who) else {
            return false;
        };
        self.index.remove(who, id);
        self.servers.forget(&self.shares, id);
        if let Some(rec) = self.shares.remove(id) {
            self.expiries.remove(&(rec.expiry_key, id));
        }
        true
    }

    /// The lease a requester holds, as last granted.
    pub fn held_lease(&self, id: RequesterId) -> Option<Lease> {
        let rec = self.shares.get(id)?;
        Some(Lease {
            capacity: self.shares.has(id),
            expiry: rec.expiry,
            refresh_interval: i64::from(rec.refresh_interval),
        })
    }
}

impl Resource {
    /// This resource's part of a bulk upstream request, if the minimum
    /// interval and the hold let it through; records it as sent.
    pub(super) fn upstream_ask(&mut self, id: &str, now: Time) -> Option<UpstreamAsk> {
        let mut bands = aggregate_bands(&self.shares.bands());
        let taken = self.shares.totals().taken;
        let learning = self.in_learning(now);
        let u = self.upstream.as_mut()?;
        let outstanding = (taken + u.predecessors_unclaimed(now)).min(MAX_AMOUNT);
        if !u.schedule.allowed(now, MIN_UPSTREAM_INTERVAL) {
            return None;
        }
        u.schedule.sent(now);
        let has = u.valid_lease(now).map(|l| Lease {
            capacity: l.capacity.min(MAX_AMOUNT),
            ..l
        });
        if let (true, Some(l)) = (learning, &has) {
            keep_while_learning(&mut bands, l.capacity);
        }
        u.reported_wants = bands.iter().map(|b| b.2).sum();
        // Until the answer comes, the parent counts the lease claimed as
        // possibly handed out (see `Resource::request`).
        u.reported_outstanding = outstanding.max(has.map_or(0.0, |l| l.capacity));
        Some(UpstreamAsk {
            resource_id: id.to_string(),
            has,
            bands,
            outstanding,
        })
    }
}
