//! The state of one resource on one server: its template, the sharing state
//! (demands and grants, in `doorman_algorithms::Shares`), each requester's
//! lease record, an expiry index for cleanup, and the learning-mode end.
//!
//! Must not: read a clock or know about protobufs.

use std::collections::BTreeSet;
use std::sync::Arc;

use doorman_algorithms::{Amount, Lease, RequesterId, Shares, Time};

use super::index::Index;
use super::request::{Decision, Grant, ResourceAsk, Who};
use super::upstream::UpstreamState;
use crate::config::Template;

/// What the server keeps per requester besides its demand and grant.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub who: Who,
    pub expiry: Time,
    pub last_request: Time,
    pub refresh_interval: u32,
    /// The last request claimed a lease (`has`).
    pub claimed: bool,
    /// What a downstream server reports having handed out (extension);
    /// NaN when not reported (keeps the record small).
    outstanding: f64,
}

impl Record {
    /// What a downstream server reported having handed out.
    pub fn outstanding(&self) -> Option<f64> {
        (!self.outstanding.is_nan()).then_some(self.outstanding)
    }
}

/// One resource.
#[derive(Debug)]
pub(crate) struct Resource {
    pub template: Arc<Template>,
    pub shares: Shares<Record>,
    pub index: Index,
    pub expiries: BTreeSet<(Time, RequesterId)>,
    pub learning_until: Time,
    /// Present on intermediate servers: the capacity comes from the parent.
    pub upstream: Option<UpstreamState>,
}

/// Settings the core passes to each request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub now: Time,
    pub min_request_interval: Time,
    /// When this server became master.
    pub master_since: Time,
}

fn amount(x: f64) -> Amount {
    // Values reaching here are results of validated inputs; clamp defensively.
    Amount::new("capacity", if x.is_finite() { x.max(0.0) } else { 0.0 }).unwrap_or(Amount::ZERO)
}

impl Resource {
    pub fn new(template: Arc<Template>, capacity: f64, learning_until: Time) -> Self {
        Resource {
            shares: Shares::new(template.algorithm.kind, amount(capacity)),
            template,
            index: Index::default(),
            expiries: BTreeSet::new(),
            learning_until,
            upstream: None,
        }
    }

    /// A resource of an intermediate server, waiting for the parent.
    pub fn new_intermediate(
        resource_id: &str,
        local: Option<Arc<Template>>,
        master_since: Time,
        now: Time,
    ) -> Self {
        let up = UpstreamState::new(local, now);
        let learning_until = master_since + up.learning_duration();
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

    /// How long leases may last: never past the upstream lease; without
    /// one, not past the end of learning mode (echoed claims) or now.
    fn lease_cap(&self, now: Time) -> Option<Time> {
        let u = self.upstream.as_ref()?;
        Some(match u.valid_lease(now) {
            Some(l) => l.expiry,
            None if self.in_learning(now) => self.learning_until,
            None => now,
        })
    }

    pub fn in_learning(&self, now: Time) -> bool {
        now < self.learning_until
    }

    /// Points the resource at a new template (config reload); leases kept.
    pub fn rebind(&mut self, template: Arc<Template>) {
        self.shares.set_kind(template.algorithm.kind);
        self.template = template;
    }

    pub fn set_capacity(&mut self, capacity: f64) {
        self.shares.set_capacity(amount(capacity));
    }

    /// Forgets every lease that expired at or before `now`, unless the
    /// resource is in learning mode. Cost: O(expired · log n).
    pub fn expire(&mut self, now: Time) -> usize {
        if self.in_learning(now) {
            return 0;
        }
        let mut n = 0;
        while let Some(&(t, id)) = self.expiries.first() {
            if t > now {
                break;
            }
            self.expiries.pop_first();
            if let Some(who) = self.shares.get(id).map(|r| r.who.clone()) {
                self.index.remove(&who, id);
                self.shares.remove(id);
                n += 1;
            }
        }
        n
    }

    /// Forgets one requester (ReleaseCapacity).
    pub fn release(&mut self, who: &Who) -> bool {
        let Some(id) = self.index.get(&self.shares, who) else {
            return false;
        };
        self.index.remove(who, id);
        if let Some(rec) = self.shares.remove(id) {
            self.expiries.remove(&(rec.expiry, id));
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

    /// Steps 2–4 of the design doc for one resource of one request.
    pub fn request(&mut self, cx: &Context, who: &Who, ask: &ResourceAsk) -> Grant {
        let now = cx.now;
        let learning = self.in_learning(now);
        let algorithm = self.template.algorithm.clone();
        let algorithm_known = self
            .upstream
            .as_ref()
            .is_none_or(|u| u.parent_algorithm.is_some());
        let existing = self.index.get(&self.shares, who);
        if let Some(id) = existing {
            if let Some(rec) = self.shares.get(id) {
                let repeat = cx.min_request_interval > Time::ZERO
                    && now < rec.last_request + cx.min_request_interval
                    && rec.expiry > now;
                if let (true, Some(lease)) = (repeat, self.held_lease(id)) {
                    return Grant {
                        resource_id: ask.resource_id.clone(),
                        lease,
                        safe_capacity: self.shares.safe_capacity(self.template.safe_capacity),
                        algorithm,
                        algorithm_known,
                        decision: Decision::Repeat,
                    };
                }
            }
        } else if ask.claimed_has.is_some() && !learning {
            tracing::debug!(
                resource = %ask.resource_id, %who,
                "request claims a lease this server has no record of; treating it as new"
            );
        }
        // A downstream server that used to claim its lease and now claims
        // none, although it holds an unexpired one here, is a newly elected
        // master of that node (replicas share the node id). Its
        // predecessor's sub-leases stay out until that lease expires, so the
        // new master inherits at least it, within what the others leave
        // free (the capacity may have shrunk since). It keeps inheriting if
        // its first answer was lost and it asks again without a claim; from
        // its next request on it claims the lease, and the algorithm rules.
        let inherited = match (existing, who, ask.claimed_has) {
            (Some(id), Who::Server(_), None) => self
                .shares
                .get(id)
                .filter(|rec| rec.claimed && rec.expiry > now)
                .map(|_| self.shares.has(id))
                .filter(|&h| h > 0.0),
            _ => None,
        };
        let id = match existing {
            Some(id) => {
                self.shares.set_demands(id, &ask.demands);
                id
            }
            None => {
                let rec = Record {
                    who: who.clone(),
                    expiry: now,
                    last_request: now,
                    refresh_interval: 0,
                    claimed: false,
                    outstanding: f64::NAN,
                };
                let id = self.shares.insert(&ask.demands, rec);
                self.index.insert(&self.shares, who, id);
                self.expiries.insert((now, id));
                id
            }
        };
        if let (Some(refresh), true) = (ask.claimed_refresh, learning) {
            let (since, until) = (cx.master_since, self.learning_until);
            if let Some(u) = self.upstream.as_mut() {
                u.hold_for_claim(since, refresh, until);
            }
        }
        let pending = self
            .upstream
            .as_ref()
            .is_some_and(|u| u.valid_lease(now).is_none());
        let (capacity, decision) = if learning && pending {
            // Capacity not known yet: echo the claim; the lease ends with
            // learning mode.
            let claimed = ask.claimed_has.unwrap_or(Amount::ZERO);
            self.shares.set_has(id, claimed);
            (claimed.get(), Decision::Learning)
        } else if learning && self.upstream.is_some() {
            // The parent's new grant may be smaller than what the previous
            // master handed out: echo claims only within it.
            let claimed = ask.claimed_has.unwrap_or(Amount::ZERO);
            (
                self.shares.decide_learning_within(id, claimed),
                Decision::Learning,
            )
        } else if learning {
            let claimed = ask.claimed_has.unwrap_or(Amount::ZERO);
            (self.shares.decide_learning(id, claimed), Decision::Learning)
        } else {
            (self.shares.decide(id), Decision::Algorithm)
        };
        let capacity = match inherited {
            Some(h) if h > capacity => {
                let kept = Amount::new("has", h).unwrap_or(Amount::ZERO);
                // min(h, free) ≥ the decision, which was capped by free too.
                self.shares.decide_learning_within(id, kept).max(capacity)
            }
            _ => capacity,
        };
        // The root hands out its template's refresh interval; an
        // intermediate server scales its own lease's refresh interval once.
        let level = u32::from(self.upstream.is_some());
        let lease = algorithm
            .terms()
            .lease(now, level, self.lease_cap(now), capacity);
        if let Some(rec) = self.shares.get_mut(id) {
            let old = rec.expiry;
            rec.expiry = lease.expiry;
            rec.last_request = now;
            rec.refresh_interval = u32::try_from(lease.refresh_interval).unwrap_or(u32::MAX);
            rec.claimed = ask.claimed_has.is_some() || inherited.is_some();
            rec.outstanding = ask.outstanding.map_or(f64::NAN, Amount::get);
            if old != lease.expiry {
                self.expiries.remove(&(old, id));
                self.expiries.insert((lease.expiry, id));
            }
        }
        Grant {
            resource_id: ask.resource_id.clone(),
            lease,
            safe_capacity: self.shares.safe_capacity(self.template.safe_capacity),
            algorithm,
            algorithm_known,
            decision,
        }
    }
}
