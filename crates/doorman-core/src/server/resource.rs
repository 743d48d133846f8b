//! The state of one resource on one server: its template, the sharing state
//! (demands and grants, in `doorman_algorithms::Shares`), each requester's
//! lease record, an expiry index for cleanup, and the learning-mode end.
//!
//! Must not: read a clock or know about protobufs.

use std::collections::BTreeSet;
use std::sync::Arc;

use doorman_algorithms::{Amount, Lease, RequesterId, Shares, Time};

use super::index::Index;
use super::request::Who;
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
    pub(super) outstanding: f64,
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
    pub(super) fn lease_cap(&self, now: Time) -> Option<Time> {
        let u = self.upstream.as_ref()?;
        Some(match u.valid_lease(now) {
            Some(l) => l.expiry,
            None if self.in_learning(now) => self.learning_until,
            None => now,
        })
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

    /// The capacity shared from now on.
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
}
