//! The request path of one resource on one server (steps 2–4 of the design
//! doc): a repeat inside the minimum interval gets the lease it holds (told
//! to come back when the interval ends if its demand moved); else
//! the demand is recorded, the grant decided (learning mode, the algorithm,
//! or a new master's inheritance at its parent), and the lease stored.
//!
//! Must not: read a clock or know about protobufs.

use doorman_algorithms::RequesterId;
use doorman_lease::{Amount, Demand, Span, Time};

use super::deadlines::refile;
use super::lowered::back_after_interval;
use super::record::Record;
use crate::schedule::moved_early;

/// A waiting requester's refresh interval is its lease's divided by this.
pub const WAITING_REFRESH_DIVISOR: i64 = 4;

/// A requester counts as waiting when its grant is below what it is owed by
/// more than this fraction (rounding never hurries anyone).
const WAITING_SLACK: f64 = 1e-6;
use super::request::{Decision, Grant, ResourceAsk, Who};
use super::resource::{Context, Resource};

impl Resource {
    /// Steps 2–4 of the design doc for one resource of one request.
    pub fn request(&mut self, cx: &Context, who: &Who, ask: &ResourceAsk) -> Grant {
        let now = cx.now;
        let learning = self.in_learning(now);
        let existing = self.index.get(&self.shares, who);
        if let Some(g) = existing.and_then(|id| self.repeat_answer(cx, (id, who), ask, learning)) {
            return g;
        }
        if existing.is_none() && ask.claim.is_some() && !learning {
            tracing::debug!(
                resource = %ask.resource_id, %who,
                "request claims a lease this server has no record of; treating it as new"
            );
        }
        let inherited = self.inherited(existing, who, ask, now);
        let predecessor = self.predecessor_out(existing, who, ask, (learning, now));
        let id = self.record_demand(existing, who, ask, (now, cx.vouched));
        if learning {
            self.count_first_claim(id, ask, now);
        }
        if let Who::Client(_) = who {
            self.note_held(id, ask, now);
        }
        if let Who::Server(_) = who {
            // A new master that inherits reports only its own sub-leases;
            // its predecessor's stay counted: what was counted, and the
            // grant itself, which may have been handed out since.
            let kept = inherited.map(|_| self.shares.taken(id));
            self.note_outstanding(id, ask, kept, now);
        }
        if let (Some(claim), true) = (ask.claim, learning) {
            let (since, until) = (cx.learning.since, self.learning_until);
            if let Some(u) = self.upstream.as_mut() {
                u.hold_for_claim(since, (claim.refresh, claim.end(now)), until);
            }
        }
        let free_before = self.shares.free_for(id);
        let (capacity, decision) = self.decide(id, ask, learning, now);
        if decision == Decision::Pending {
            let lease = doorman_lease::Lease {
                capacity: 0.0,
                expiry: now,
                refresh_interval: 1,
            };
            return self.grant(&ask.resource_id, lease, decision, now);
        }
        let capacity = self.inherit(id, capacity, inherited);
        let claim_end = ask.claim.map(|c| c.end(now));
        let requester = (id, who, claim_end);
        let (lease, hurry) = self.lease_for(cx, requester, (capacity, free_before), decision);
        self.keep(cx, id, ask, &lease, inherited.is_some());
        let mut grant = self.grant(&ask.resource_id, lease, decision, now);
        if let Who::Server(_) = who {
            grant.next_refresh_interval = hurry;
            grant.predecessor_out = predecessor.map(|p| p.0);
            grant.predecessor_until = predecessor.map(|p| p.1);
        }
        grant
    }

    /// Stores the lease handed out to `id` and what follows from it: until
    /// when a successor may inherit it, whether its holder speaks the
    /// original's protocol, and its place in the absence index.
    fn keep(
        &mut self,
        cx: &Context,
        id: RequesterId,
        ask: &ResourceAsk,
        lease: &doorman_lease::Lease,
        inherited: bool,
    ) {
        let inherit_until = match (ask.claimed_has(), inherited) {
            (Some(_), _) => lease.expiry,
            (None, true) => self
                .shares
                .get(id)
                .map_or(Time::ZERO, Record::inherit_until),
            // One of our servers (it reports `outstanding`) always claims a
            // lease it holds: a successor may inherit this grant even if
            // its holder dies before it could claim it once.
            (None, false) if ask.outstanding.is_some() => lease.expiry,
            (None, false) => Time::ZERO,
        };
        if let Some(Who::Client(_)) = self.shares.get(id).map(|r| &r.who) {
            self.settle_lowered(id);
        }
        self.store(id, lease, cx.now, inherit_until, ask.outstanding);
        if let (Some(c), Some(rec)) = (ask.claim, self.shares.get_mut(id)) {
            rec.legacy = c.remaining.is_none();
        }
        self.reindex_absent(id, cx);
    }

    /// What a downstream server still has handed out of a larger earlier
    /// grant stays counted as taken until it reports it gone
    /// (docs/algorithms.md). Until it has this answer it may hand out up to
    /// the lease it claims, whatever it had out when it sent the request;
    /// `kept` is what stays counted for a predecessor's sub-leases.
    fn note_outstanding(
        &mut self,
        id: RequesterId,
        ask: &ResourceAsk,
        kept: Option<f64>,
        now: Time,
    ) {
        let out = [
            ask.outstanding.map(Amount::get),
            ask.claimed_has().map(Amount::get),
            kept,
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max);
        // No more than it can hold from grants still unexpired: a server
        // that keeps reporting what it once had out cannot hold that
        // capacity after the lease it came from has ended.
        let most = self
            .shares
            .get_mut(id)
            .map_or(0.0, |r| r.largest_unexpired(now));
        let out = out.and_then(|x| Amount::new("outstanding", x.min(most)).ok());
        self.shares.set_outstanding(id, out);
    }

    /// A repeat inside the minimum interval gets the lease it holds. For a
    /// downstream server it still carries news that must not be lost with
    /// it (found with the simulator: a report sent one minimum interval
    /// after the last arrives inside it whenever the network is quicker
    /// the second time): that its sub-leases have come down, which frees
    /// the capacity others wait for, and, if it is still owed more than it
    /// holds, that it should come back sooner.
    fn repeat_grant(
        &mut self,
        id: RequesterId,
        who: &Who,
        ask: &ResourceAsk,
        lease: doorman_lease::Lease,
        learning: bool,
        now: Time,
    ) -> Grant {
        let mut grant = self.grant(&ask.resource_id, lease, Decision::Repeat, now);
        if let Who::Client(_) = who {
            self.repeat_held(id, ask, now);
        }
        // Only from a server that claims its lease: one asking without a
        // claim may be a new master, whose report covers only its own
        // sub-leases (see `Resource::inherited`); its next request is
        // decided in full.
        if let (Who::Server(_), Some(_)) = (who, ask.claimed_has()) {
            self.note_outstanding(id, ask, None, now);
            if !learning {
                grant.next_refresh_interval = self.waiting_refresh(id, Decision::Algorithm, &lease);
            }
        }
        grant
    }

    /// The lease for a grant of `capacity` (`free_before` was free for it),
    /// and the sooner refresh a waiting downstream server gets beside it.
    /// The root hands out its template's refresh interval; an intermediate
    /// server scales its own lease's refresh interval once. A waiting end
    /// client's own interval is shortened.
    fn lease_for(
        &mut self,
        cx: &Context,
        (id, who, claim_end): (RequesterId, &Who, Option<Time>),
        (capacity, free_before): (f64, f64),
        decision: Decision,
    ) -> (doorman_lease::Lease, Option<i64>) {
        let terms = self.template.algorithm.terms();
        let cap = self.lease_cap(cx, capacity, claim_end);
        let mut lease = terms.lease(cx.now, self.level(), cap, capacity);
        if decision == Decision::Algorithm {
            self.keep_no_longer(id, capacity, free_before, &mut lease, cx.now);
        }
        let hurry = self.waiting_refresh(id, decision, &lease);
        if let (Some(h), Who::Client(_)) = (hurry, who) {
            lease.refresh_interval = h;
        }
        // A lowered client comes back soon to show it got the lower grant
        // (`lowered.rs`).
        if matches!(who, Who::Client(_)) && self.is_lowered(id) {
            back_after_interval(&mut lease, cx.min_request_interval);
        }
        (lease, hurry)
    }

    /// A share algorithm's grant beyond what was free is capacity the
    /// requester kept from the lease it holds (`Shares::decide`: the
    /// capacity shrank and the others have not refreshed yet). On a
    /// downstream server, leases renewed from a larger grant would outlive
    /// it, and its parent, which counts them only while that grant lasts
    /// (`Grants::largest_unexpired`), would hand the excess out again
    /// (found with the simulator: 100.36 %). Such a lease lasts no longer
    /// than the latest of this server's own grants that covers all it has
    /// out (`Grants::covering`), or than the lease it was kept from if
    /// that is later or nothing covers (a root whose capacity shrank). Not
    /// just the lease it was kept from: under a parent that shrinks a
    /// little at every refresh that never got renewed, and ran out while
    /// the parent was cut off (issue 17, seed 4: 76 % for 45 s).
    fn keep_no_longer(
        &mut self,
        id: RequesterId,
        capacity: f64,
        free_before: f64,
        lease: &mut doorman_lease::Lease,
        now: Time,
    ) {
        let share = self.template.algorithm.kind.is_share();
        if !share || capacity <= free_before + WAITING_SLACK * capacity.max(1.0) {
            return;
        }
        let Some(kept_from) = self.shares.get(id).map(|r| r.expiry) else {
            return;
        };
        let out = self.shares.taken_total();
        let covered = self
            .upstream
            .as_mut()
            .and_then(|u| u.grants.covering(out, now));
        let until = covered.map_or(kept_from, |c| c.max(kept_from));
        lease.expiry = lease.expiry.min(until);
    }

    /// The answer to a repeat inside the minimum interval, if this is one:
    /// the lease held, told to come back when the interval ends if its
    /// demand moved (decided then: without this it waited a whole refresh
    /// interval, its holder taking the new demand as sent).
    fn repeat_answer(
        &mut self,
        cx: &Context,
        (id, who): (RequesterId, &Who),
        ask: &ResourceAsk,
        learning: bool,
    ) -> Option<Grant> {
        let mut lease = self.repeat(cx, id)?;
        if self.demand_moved(id, ask) {
            back_after_interval(&mut lease, cx.min_request_interval);
        }
        Some(self.repeat_grant(id, who, ask, lease, learning, cx.now))
    }

    /// True when `ask`'s demand differs from the one recorded for `id` by
    /// the change a holder asks early for ([`moved_early`]).
    fn demand_moved(&self, id: RequesterId, ask: &ResourceAsk) -> bool {
        let asked: f64 = ask.demands.iter().map(Demand::wants).sum();
        moved_early(self.shares.wants(id), asked)
    }

    /// The lease held, for a repeat request inside the minimum interval.
    fn repeat(&self, cx: &Context, id: RequesterId) -> Option<doorman_lease::Lease> {
        let rec = self.shares.get(id)?;
        let repeat = cx.min_request_interval > Span::ZERO
            && cx.now < rec.last_request + cx.min_request_interval
            && rec.expiry > cx.now;
        if repeat {
            self.held_lease(id)
        } else {
            None
        }
    }

    /// Records the requester's demands (a new requester gets a record). A
    /// downstream server's claimed subclients are bounded (`open_share.rs`).
    fn record_demand(
        &mut self,
        existing: Option<RequesterId>,
        who: &Who,
        ask: &ResourceAsk,
        (now, vouched): (Time, bool),
    ) -> RequesterId {
        let Who::Server(_) = who else {
            return self.put_demands(existing, who, &ask.demands, now);
        };
        let before = self.server_before(existing);
        let (demands, claimed) = self.server_demands(existing, &ask.demands, vouched);
        let id = self.put_demands(existing, who, &demands, now);
        self.count_server(id, claimed, before);
        id
    }

    /// Sets the requester's demands, or gives a new one a record.
    fn put_demands(
        &mut self,
        existing: Option<RequesterId>,
        who: &Who,
        demands: &[Demand],
        now: Time,
    ) -> RequesterId {
        if let Some(id) = existing {
            self.shares.set_demands(id, demands);
            return id;
        }
        let rec = Record {
            who: who.clone(),
            expiry: now,
            held_until: now,
            last_request: now,
            refresh_interval: 0,
            claim_counted: false,
            legacy: false,
            server: None,
            absent_at: Time::ZERO,
            expiry_key: now,
            lowered_until: Time::ZERO,
            claimed: 0,
        };
        let id = self.shares.insert(demands, rec);
        self.index.insert(&self.shares, who, id);
        self.expiries.insert((now, id));
        id
    }

    /// The grant: learning mode echoes claims (within the parent's grant
    /// on an intermediate server), else the algorithm decides.
    fn decide(
        &mut self,
        id: RequesterId,
        ask: &ResourceAsk,
        learning: bool,
        now: Time,
    ) -> (f64, Decision) {
        if !learning {
            return (self.shares.decide(id), Decision::Algorithm);
        }
        let claimed = ask.claimed_has().unwrap_or(Amount::ZERO);
        let pending = self
            .upstream
            .as_ref()
            .is_some_and(|u| u.valid_lease(now).is_none());
        let capacity = if pending {
            return self.decide_pending(id, claimed);
        } else if let Some(u) = self.upstream.as_ref() {
            match u.learning_bound(now) {
                // What the predecessors can still have out is known: what
                // the parent granted beyond it may be handed out too.
                Some(bound) => self.shares.decide_learning_grow(id, claimed, bound),
                // The parent's new grant may be smaller than what the
                // previous master handed out: echo claims only within it.
                None => self.shares.decide_learning_within(id, claimed),
            }
        } else {
            self.shares.decide_learning(id, claimed)
        };
        (capacity, Decision::Learning)
    }

    /// A requester granted less than it is owed (its target, within its
    /// wants) because others still hold that capacity until they refresh
    /// (`min(target, free)`) should come back after a quarter of its
    /// refresh interval (at least a second): the capacity the others give
    /// back is then idle for a quarter of an interval, not a whole one.
    /// Only waiting requesters ask more often. An end client gets the
    /// shorter interval as its lease's; a downstream server gets it beside
    /// the lease (`Grant::next_refresh_interval`), so its own requesters'
    /// intervals, which follow its lease's, are not shortened too.
    fn waiting_refresh(
        &mut self,
        id: RequesterId,
        decision: Decision,
        lease: &doorman_lease::Lease,
    ) -> Option<i64> {
        let share = self.template.algorithm.kind.is_share();
        if decision != Decision::Algorithm || !share {
            return None;
        }
        let owed = self.shares.target(id).min(self.shares.wants(id));
        (lease.capacity < owed * (1.0 - WAITING_SLACK))
            .then(|| (lease.refresh_interval / WAITING_REFRESH_DIVISOR).max(1))
    }

    /// Stores the lease in the requester's record and the expiry index.
    fn store(
        &mut self,
        id: RequesterId,
        lease: &doorman_lease::Lease,
        now: Time,
        inherit_until: Time,
        outstanding: Option<Amount>,
    ) {
        let Some(rec) = self.shares.get_mut(id) else {
            return;
        };
        // A lease granted before may end later than this one, and be
        // what the requester holds if this answer is lost: a client cut
        // off just after its request arrived would use it after this
        // server had forgotten it and handed its share out (a CI run of
        // the fault harness saw a cut client's share handed out 3 s early).
        rec.held_until = rec.held_until.max(lease.expiry);
        rec.expiry = lease.expiry;
        rec.last_request = now;
        rec.refresh_interval = u32::try_from(lease.refresh_interval).unwrap_or(u32::MAX);
        if let Who::Server(_) = rec.who {
            let part = rec.server.get_or_insert_with(Box::default);
            part.inherit_until = inherit_until;
            part.outstanding = outstanding.map_or(f64::NAN, Amount::get);
            part.grants.note(lease.capacity, lease.expiry);
        }
        // One key per record, at or before its next deadline
        // (`deadlines::refile`; a new record's key, filed at its creation,
        // is due).
        let due = rec.due();
        refile(&mut self.expiries, &mut rec.expiry_key, id, due, now);
    }

    pub(super) fn grant(
        &self,
        resource_id: &str,
        lease: doorman_lease::Lease,
        decision: Decision,
        now: Time,
    ) -> Grant {
        let algorithm_known = self
            .upstream
            .as_ref()
            .is_none_or(|u| u.parent_algorithm.is_some());
        Grant {
            resource_id: resource_id.to_string(),
            lease,
            at: now,
            safe_capacity: self.shares.safe_capacity(self.template.safe_capacity),
            algorithm: self.template.algorithm.clone(),
            algorithm_known,
            decision,
            shadow: self.template.shadow,
            note: None,
            next_refresh_interval: None,
            predecessor_out: None,
            predecessor_until: None,
        }
    }
}
