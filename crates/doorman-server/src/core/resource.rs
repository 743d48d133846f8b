//! The state of one resource on one server: its template, the sharing state
//! (demands and grants, in `doorman_algorithms::Shares`), each requester's
//! lease record, an expiry index for cleanup, and the learning-mode end.
//!
//! Must not: read a clock or know about protobufs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use doorman_algorithms::{Amount, Lease, RequesterId, Shares, Time};

use super::request::{Decision, Grant, ResourceAsk, Who};
use crate::config::Template;

/// What the server keeps per requester besides its demand and grant.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub who: Who,
    pub expiry: Time,
    pub last_request: Time,
    pub refresh_interval: i64,
    /// What a downstream server reports having handed out (extension).
    pub outstanding: Option<f64>,
}

/// One resource.
#[derive(Debug)]
pub(crate) struct Resource {
    pub template: Arc<Template>,
    pub shares: Shares<Record>,
    pub index: HashMap<Who, RequesterId>,
    pub expiries: BTreeSet<(Time, RequesterId)>,
    pub learning_until: Time,
}

/// Settings the core passes to each request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub now: Time,
    pub level: u32,
    pub min_request_interval: Time,
    /// The server's own lease on this resource's capacity (non-root).
    pub upstream_expiry: Option<Time>,
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
            index: HashMap::new(),
            expiries: BTreeSet::new(),
            learning_until,
        }
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
            if let Some(rec) = self.shares.remove(id) {
                self.index.remove(&rec.who);
                n += 1;
            }
        }
        n
    }

    /// Forgets one requester (ReleaseCapacity).
    pub fn release(&mut self, who: &Who) -> bool {
        let Some(id) = self.index.remove(who) else {
            return false;
        };
        if let Some(rec) = self.shares.remove(id) {
            self.expiries.remove(&(rec.expiry, id));
        }
        true
    }

    /// Steps 2–4 of the design doc for one resource of one request.
    pub fn request(&mut self, cx: &Context, who: &Who, ask: &ResourceAsk) -> Grant {
        let now = cx.now;
        let learning = self.in_learning(now);
        let algorithm = self.template.algorithm.clone();
        let existing = self.index.get(who).copied();
        if let Some(id) = existing {
            if let Some(rec) = self.shares.get(id) {
                let repeat = cx.min_request_interval > Time::ZERO
                    && now < rec.last_request + cx.min_request_interval
                    && rec.expiry > now;
                if repeat {
                    return Grant {
                        resource_id: ask.resource_id.clone(),
                        lease: Lease {
                            capacity: self.shares.has(id),
                            expiry: rec.expiry,
                            refresh_interval: rec.refresh_interval,
                        },
                        safe_capacity: self.shares.safe_capacity(self.template.safe_capacity),
                        algorithm,
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
                    outstanding: None,
                };
                let id = self.shares.insert(&ask.demands, rec);
                self.index.insert(who.clone(), id);
                self.expiries.insert((now, id));
                id
            }
        };
        let (capacity, decision) = if learning {
            let claimed = ask.claimed_has.unwrap_or(Amount::ZERO);
            (self.shares.decide_learning(id, claimed), Decision::Learning)
        } else {
            (self.shares.decide(id), Decision::Algorithm)
        };
        let lease = algorithm
            .terms()
            .lease(now, cx.level, cx.upstream_expiry, capacity);
        if let Some(rec) = self.shares.get_mut(id) {
            let old = rec.expiry;
            rec.expiry = lease.expiry;
            rec.last_request = now;
            rec.refresh_interval = lease.refresh_interval;
            rec.outstanding = ask.outstanding.map(Amount::get);
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
            decision,
        }
    }
}
