//! Pushed grants: what a holder connected on a lease stream would get
//! now, handed to it without a request when it changed enough
//! (docs/algorithms.md, "How grants move on a lease stream").
//!
//! A pushed grant keeps the end of the lease it replaces: only a request
//! renews a lease, so a holder measures every lease's end from a request
//! it sent, on its own clock, and this server never counts a lease for
//! less time than its holder may use it. A push that lowers a grant leaves
//! the old amount counted until the holder acknowledges it (a request
//! claiming the lower lease: `lowered.rs`) or may hold it no longer, as a
//! lowered answer does: the push may be lost with its stream. A
//! downstream server pushed a lower grant stays counted for all it had
//! until its next request reports what it still has out (`outstanding`,
//! bounded by its unexpired grants as always); a raise pushed to it joins
//! those grants at once, so what it hands out of it is never counted for
//! less.
//!
//! Must not: renew a lease; push in learning mode or without a lease from
//! the parent; read a clock.

use doorman_lease::{Amount, Lease, Span, Time};

use super::deadlines::refile;
use super::request::{Decision, Grant, Who};
use super::resource::{Context, Resource};

/// When a change is worth a push, and how often a holder may get one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PushRule {
    /// At most one push per holder per this (a holder's stream, whatever
    /// its resources).
    pub min_gap: Span,
    /// A raise smaller than this fraction of the grant is not pushed (it
    /// waits for the next renewal); a lowered grant always is.
    pub min_change: f64,
}

/// The rule the server runs with: at most 100 pushes per holder per
/// second, and no raise below 1 %. (At 20 ms, a newcomer among 100
/// holders waited two gaps for the acknowledgements of the others'
/// lowered grants: 51 ms p99, `benches/push_latency.rs` in doorman-e2e.)
pub const PUSH_RULE: PushRule = PushRule {
    min_gap: Span::from_millis(10),
    min_change: 0.01,
};

/// How long moved resources are gathered before a push pass, so a burst
/// (a hundred holders acknowledging a lowered grant within a millisecond
/// or two) is one pass and one push to the holder waiting for what they
/// freed (the server's pusher; the simulator's).
pub const PUSH_BATCH: Span = Span::from_millis(2);

/// A grant counts as lowered or raised only beyond this fraction
/// (rounding moves nothing).
const SLACK: f64 = 1e-9;

impl PushRule {
    /// Whether moving a grant of `has` to `would` is worth a push.
    pub fn worth(&self, has: f64, would: f64) -> bool {
        let scale = has.max(would).max(1e-9);
        would < has - SLACK * scale || would - has > self.min_change * scale
    }

    /// When a holder last pushed at `last` may get its next push.
    pub fn next_allowed(&self, last: Option<Time>) -> Time {
        last.map_or(Time::ZERO, |t| t + self.min_gap)
    }
}

/// The holders of a resource a push pass looks at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// The resource's generation (`None`: no push there now).
    pub generation: Option<u64>,
    /// Those whose grant may have moved and who do not hold their target.
    pub whos: Vec<Who>,
    /// How many holders were looked at (what the pass spends of its
    /// budget, `push_budget.rs`).
    pub looked: usize,
    /// Some were left for a later pass (the limit was reached).
    pub more: bool,
}

/// What a push pass found for one holder of one resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Push {
    /// Nothing worth pushing.
    Nothing,
    /// A change worth pushing, held back by the rule until this time.
    Later(Time),
    /// The grant to push (already recorded).
    Grant(Grant),
}

impl Resource {
    /// No push now: in learning mode, or cut off from the parent.
    fn not_pushing(&self, now: Time) -> bool {
        let cut_off = self
            .upstream
            .as_ref()
            .is_some_and(|u| u.valid_lease(now).is_none());
        self.in_learning(now) || cut_off
    }

    /// Up to `limit` of the requesters whose grant may differ from what
    /// they would get now (`Shares::take_movers`), unexpired and not
    /// holding their target. Those the pass does not push to are looked at
    /// again once they are noted again: by their next request, or a change
    /// of rule; those past the limit stay noted.
    pub(super) fn push_candidates(&mut self, cx: &Context, limit: usize) -> Candidates {
        if self.not_pushing(cx.now) {
            return Candidates::default();
        }
        let (ids, more) = self.shares.take_movers(limit);
        let mut whos = Vec::new();
        for &id in &ids {
            let live = self.shares.get(id).filter(|r| r.expiry > cx.now);
            if let Some(who) = live.map(|r| r.who.clone()) {
                if !self.shares.settled(id) {
                    whos.push(who);
                }
            }
        }
        Candidates {
            generation: None,
            whos,
            looked: ids.len(),
            more,
        }
    }

    /// What requester `who` would get now, recorded and returned if the
    /// `rule` says it is worth a push and its last push (`last`) allows.
    /// One left short of its target, or held back, is kept for the next
    /// pass (`Shares::keep_mover`; a pushed grant's new `has` notes it).
    pub(super) fn push(
        &mut self,
        cx: &Context,
        (resource_id, who): (&str, &Who),
        last: Option<Time>,
        rule: &PushRule,
    ) -> Push {
        let now = cx.now;
        if self.not_pushing(now) {
            return Push::Nothing;
        }
        let Some(id) = self.index.get(&self.shares, who) else {
            return Push::Nothing;
        };
        let Some(rec) = self.shares.get(id).filter(|r| r.expiry > now) else {
            return Push::Nothing;
        };
        let lease_end = rec.expiry;
        let refresh_interval = i64::from(rec.refresh_interval);
        let (has, would) = (self.shares.has(id), self.shares.would_get(id));
        if !rule.worth(has, would) {
            self.shares.keep_mover(id);
            return Push::Nothing;
        }
        let allowed = rule.next_allowed(last);
        if now < allowed {
            self.shares.keep_mover(id);
            return Push::Later(allowed);
        }
        match who {
            Who::Client(_) if would < has => self.keep_counting(id, now),
            Who::Server(_) if would < has => self.keep_outstanding(id),
            _ => {}
        }
        self.shares.set_has(id, super::resource::amount(would));
        if let Some(part) = self.shares.get_mut(id).and_then(|r| r.server.as_mut()) {
            part.grants.note(would, lease_end);
        }
        // A grant that leaves it short of its target: the new `has` notes it
        // for the next pass (`Shares::take_movers`).
        let lease = Lease {
            capacity: would,
            expiry: lease_end,
            refresh_interval,
        };
        Push::Grant(self.grant(resource_id, lease, Decision::Algorithm, now))
    }

    /// Before a push lowers downstream server `id`'s grant: all it is
    /// counted for now stays counted as handed out below it, until its next
    /// request says what it still has out.
    fn keep_outstanding(&mut self, id: doorman_algorithms::RequesterId) {
        let taken = self.shares.taken(id);
        self.shares
            .set_outstanding(id, Amount::new("taken", taken).ok());
    }

    /// Before a push lowers `id`'s grant: all it is counted for now stays
    /// counted until it claims less or may hold none of it (its record's
    /// `held_until`: the push may be lost and the holder keep the higher
    /// lease to its end).
    fn keep_counting(&mut self, id: doorman_algorithms::RequesterId, now: Time) {
        let taken = self.shares.taken(id);
        self.shares
            .set_outstanding(id, Amount::new("taken", taken).ok());
        if let Some(rec) = self.shares.get_mut(id) {
            rec.lowered_until = rec.held_until;
            let due = rec.due();
            refile(&mut self.expiries, &mut rec.expiry_key, id, due, now);
        }
    }
}

impl super::ResourceShard {
    /// The parent pushed `grants` to this intermediate: each resource's
    /// upstream lease takes the new capacity and keeps its end (measured
    /// here from the request that got it). After a lowering, the parent
    /// counts all this node had until a request reports what is still out
    /// (`Resource::keep_outstanding` there): that request is expedited at
    /// once if nothing beyond the new lease is out, else when it comes
    /// down (`UpstreamState::outstanding_settled`). A raise that arrives
    /// while a request is out (`asking`) is dropped, as an end client
    /// drops one (`ClientCore::on_push`): it was decided before that
    /// request, whose claim and report are all the parent counts beside its
    /// answer, so sub-leases handed out of it would be counted by no one
    /// until the next report. Returns the resources whose capacity moved.
    pub fn upstream_push(
        &mut self,
        node: &super::Node,
        now: Time,
        (grants, asking): (&[super::UpstreamGrant], bool),
    ) -> Vec<String> {
        let mut moved = Vec::new();
        if !node.is_master || !node.is_intermediate() {
            return moved;
        }
        for g in grants {
            let Some(r) = self.resources.get_mut(&g.resource_id) else {
                continue;
            };
            // Shadow mode follows the parent's latest word, pushed or not.
            let shadow_moved = r
                .upstream
                .as_mut()
                .is_some_and(|u| std::mem::replace(&mut u.parent_shadow, g.shadow) != g.shadow);
            if shadow_moved {
                r.rebind_upstream(&g.resource_id);
            }
            let Some(u) = r.upstream.as_mut() else {
                continue;
            };
            let Some(mut lease) = u.valid_lease(now) else {
                continue;
            };
            let capacity = g.lease.capacity;
            let raise = capacity > lease.capacity;
            if !capacity.is_finite() || capacity < 0.0 || capacity == lease.capacity {
                continue;
            }
            if raise && asking {
                continue;
            }
            if !raise {
                u.reported_outstanding = u.reported_outstanding.max(lease.capacity);
            } else {
                u.grants.note_own(capacity, lease.expiry);
            }
            lease.capacity = capacity;
            u.lease = Some(lease);
            r.refresh_upstream(now, &g.resource_id);
            r.ask_parent_now(now, None);
            moved.push(g.resource_id.clone());
        }
        moved
    }
}
