//! The harness's world: the core, the requests built as wire messages and
//! validated, every grant handed out, and the invariant's checks.

use std::collections::HashMap;
use std::sync::Arc;

use doorman_core::server::{CapacityRequest, CoreOptions, Decision, ServerCore, Sharded, Who};
use doorman_lease::{Span, Time};
use doorman_proto::doorman as pb;
use doorman_wire::{convert, validate};
use proptest::prelude::*;

use super::fair::{counted, LastAsk};
use super::{config, Claim, Op, BURST_CAPACITY, DB, HONEST, LEASE, REFRESH};

/// A request validation refused: it must be INVALID_ARGUMENT.
pub(crate) fn invalid(status: &tonic::Status) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        status.code(),
        tonic::Code::InvalidArgument,
        "{}",
        status.message()
    );
    Ok(())
}

/// A grant as handed out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub(crate) capacity: f64,
    pub(crate) expiry: Time,
    pub(crate) term: usize,
}

pub(crate) struct World {
    pub(crate) core: ServerCore,
    pub(crate) now: Time,
    pub(crate) term: usize,
    pub(crate) master_since: Time,
    /// `db`'s capacity, `None` while its template is removed.
    pub(crate) db: Option<f64>,
    pub(crate) last_db: f64,
    /// (since, capacity of `db` in force; 0 while removed).
    pub(crate) history: Vec<(Time, f64)>,
    pub(crate) held: HashMap<(Who, String), Held>,
    pub(crate) asked: HashMap<(Who, String), (pb::GetCapacityRequest, LastAsk)>,
    pub(crate) asked_server: HashMap<(Who, String), (pb::GetServerCapacityRequest, LastAsk)>,
    /// A claim beyond what its requester held was honoured in learning
    /// mode; the grant it got lasts until this.
    pub(crate) tainted_until: Time,
    /// The decisions so far, for a failure's message.
    pub(crate) log: Vec<String>,
    pub(crate) bursts: usize,
    pub(crate) burst_ids: usize,
}

pub(crate) fn lease(h: Held) -> pb::Lease {
    pb::Lease {
        expiry_time: h.expiry.whole_secs(),
        refresh_interval: REFRESH,
        capacity: h.capacity,
        remaining_ms: None,
    }
}

impl World {
    pub(crate) fn new() -> Self {
        let start = Time::from_secs(1_000_000);
        let mut core = ServerCore::new(CoreOptions::default(), config(Some(100.0)));
        core.become_master(start);
        World {
            core,
            now: start,
            term: 0,
            master_since: start,
            db: Some(100.0),
            last_db: 100.0,
            history: vec![(start, 100.0)],
            held: HashMap::new(),
            asked: HashMap::new(),
            asked_server: HashMap::new(),
            tainted_until: Time::ZERO,
            log: Vec::new(),
            bursts: 0,
            burst_ids: 0,
        }
    }

    pub(crate) fn holding(&self, who: &Who, resource: &str) -> Option<Held> {
        let h = self.held.get(&(who.clone(), resource.to_string()))?;
        (h.expiry > self.now).then_some(*h)
    }

    /// A lease of `capacity` a requester claims without holding it, as if
    /// granted now.
    fn made_up_lease(&self, capacity: f64) -> pb::Lease {
        pb::Lease {
            expiry_time: (self.now + Span::secs(LEASE)).whole_secs(),
            refresh_interval: REFRESH,
            capacity,
            remaining_ms: None,
        }
    }

    pub(crate) fn capacity_now(&self, resource: &str) -> Option<f64> {
        if resource == DB {
            self.db
        } else {
            Some(BURST_CAPACITY)
        }
    }

    /// The most capacity in force for `resource` over the last lease.
    pub(crate) fn bound(&self, resource: &str) -> f64 {
        if resource != DB {
            return BURST_CAPACITY;
        }
        let from = self.now - Span::secs(LEASE);
        let mut bound = 0.0f64;
        for (i, (_, c)) in self.history.iter().enumerate() {
            let until = self.history.get(i + 1).map_or(Time::MAX, |n| n.0);
            if until > from {
                bound = bound.max(*c);
            }
        }
        bound
    }

    /// Records the grants of one answered request, and checks a grant that
    /// grew against the capacity in force now.
    pub(crate) fn record(
        &mut self,
        who: &Who,
        grants: Vec<doorman_core::server::Grant>,
    ) -> Result<(), TestCaseError> {
        for g in grants {
            if g.decision == Decision::Unmatched {
                continue;
            }
            let key = (who.clone(), g.resource_id.clone());
            let before = self
                .holding(who, &g.resource_id)
                .filter(|h| h.term == self.term);
            self.held.insert(
                key,
                Held {
                    capacity: g.lease.capacity,
                    expiry: g.lease.expiry,
                    term: self.term,
                },
            );
            let grew = before.map_or(g.lease.capacity > 0.0, |b| {
                g.lease.capacity > b.capacity + 1e-9
            });
            if let (true, Some(c)) = (grew, self.capacity_now(&g.resource_id)) {
                let sum = self.sum(&g.resource_id, true);
                prop_assert!(
                    sum <= c * (1.0 + 1e-9) + 1e-9,
                    "{who} grew to {} on {}: Σ {} > capacity {}",
                    g.lease.capacity,
                    g.resource_id,
                    sum,
                    c
                );
            }
        }
        Ok(())
    }

    pub(crate) fn client(
        &mut self,
        who: &str,
        resource: &str,
        wants: f64,
        has: Option<f64>,
    ) -> Result<(), TestCaseError> {
        let id = Who::Client(Arc::from(who));
        let held = self.holding(&id, resource);
        let has = match has {
            Some(lie) => Some(pb::Lease {
                capacity: lie,
                ..held.map_or(self.made_up_lease(0.0), lease)
            }),
            None => held.map(lease),
        };
        let req = pb::GetCapacityRequest {
            client_id: who.into(),
            resource: vec![pb::ResourceRequest {
                resource_id: resource.into(),
                priority: 0,
                has,
                wants,
                has_remaining_ms: None,
            }],
        };
        self.send_client(req)
    }

    pub(crate) fn send_client(&mut self, req: pb::GetCapacityRequest) -> Result<(), TestCaseError> {
        let checked = match validate::get_capacity(&req) {
            Ok(c) => c,
            Err(status) => return invalid(&status),
        };
        for a in &checked.request.resources {
            let key = (checked.request.who.clone(), a.resource_id.clone());
            self.asked.insert(key, (req.clone(), counted(&a.demands)));
        }
        self.decide(&checked.request)
    }

    /// Decides a validated request, records its grants, and notes when a
    /// claim beyond what the requester holds was honoured (learning mode
    /// cannot tell it from a lease): the cross-master check is off until
    /// that grant has expired.
    pub(crate) fn decide(&mut self, req: &CapacityRequest) -> Result<(), TestCaseError> {
        let who = req.who.clone();
        let lies: Vec<&str> = req
            .resources
            .iter()
            .filter(|a| {
                let held = self
                    .holding(&who, &a.resource_id)
                    .map_or(0.0, |h| h.capacity);
                a.claimed_has().is_some_and(|h| h.get() > held + 1e-9)
            })
            .map(|a| a.resource_id.as_str())
            .collect();
        let grants = self.core.get_capacity(self.now, req).unwrap();
        if req.resources.len() < 4 {
            let asks: Vec<_> = req
                .resources
                .iter()
                .map(|a| {
                    (
                        a.claimed_has().map(|h| h.get()),
                        a.outstanding.map(|o| o.get()),
                        a.demands
                            .iter()
                            .map(|d| (d.priority(), d.subclients(), d.wants()))
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            let got: Vec<_> = grants
                .iter()
                .map(|g| (g.lease.capacity, g.decision))
                .collect();
            self.log.push(format!(
                "{} {who} {asks:?} -> {got:?}",
                self.now.as_millis() % 1_000_000
            ));
        }
        for g in grants
            .iter()
            .filter(|g| lies.contains(&g.resource_id.as_str()))
        {
            if g.decision == Decision::Learning {
                self.tainted_until = self.tainted_until.max(g.lease.expiry);
            }
        }
        self.record(&who, grants)
    }

    pub(crate) fn fake(
        &mut self,
        i: usize,
        bands: &[(i64, i64, f64)],
        claim: &Claim,
        outstanding: Option<f64>,
    ) -> Result<(), TestCaseError> {
        let name = format!("fake-{i}");
        let who = Who::Server(Arc::from(name.as_str()));
        let held = self.holding(&who, DB);
        let has = match claim {
            Claim::Holds => held.map(lease),
            Claim::Omits => None,
            Claim::Invents(x) => Some(self.made_up_lease(*x)),
        };
        let wants = convert::bands_to_wire(bands);
        let req = pb::GetServerCapacityRequest {
            report: None,
            server_id: name,
            resource: vec![pb::ServerCapacityResourceRequest {
                resource_id: DB.into(),
                has,
                wants,
                outstanding,
                has_remaining_ms: None,
            }],
        };
        self.send_server(req)
    }

    pub(crate) fn send_server(
        &mut self,
        req: pb::GetServerCapacityRequest,
    ) -> Result<(), TestCaseError> {
        let checked = match validate::get_server_capacity(&req) {
            Ok(c) => c,
            Err(status) => return invalid(&status),
        };
        for a in &checked.request.resources {
            let key = (checked.request.who.clone(), a.resource_id.clone());
            self.asked_server
                .insert(key, (req.clone(), counted(&a.demands)));
        }
        self.decide(&checked.request)
    }

    pub(crate) fn release(&mut self, i: usize) {
        let mine = i < HONEST;
        let name = format!("honest-{}", i % HONEST);
        // The Go client's Close(): one empty id per resource, then the ids.
        let ids = if mine {
            vec![String::new(), DB.into()]
        } else {
            vec![String::new(), "other".into(), "burst/none".into()]
        };
        let req = pb::ReleaseCapacityRequest {
            client_id: name.clone(),
            resource_id: ids,
        };
        let (who, ids) = validate::release_capacity(&req).expect("the Go client's shape is valid");
        self.core.release(&who, &ids).unwrap();
        if mine {
            self.held.remove(&(who.clone(), DB.to_string()));
            self.asked.remove(&(who, DB.to_string()));
        }
    }

    pub(crate) fn reload(&mut self, db: Option<f64>) {
        self.db = db;
        if let Some(c) = db {
            self.last_db = c;
        }
        self.history.push((self.now, db.unwrap_or(0.0)));
        self.core.replace_config(config(db));
    }

    pub(crate) fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Advance(ms) => self.now += Span::from_millis(*ms),
            Op::Honest(i) => {
                self.client(&format!("honest-{i}"), DB, 10.0 + 10.0 * *i as f64, None)?
            }
            Op::Liar(i, has, wants) => self.client(&format!("liar-{i}"), DB, *wants, Some(*has))?,
            Op::Fake(i, bands, claim, out) => self.fake(*i, bands, claim, *out)?,
            Op::Release(i) => self.release(*i),
            Op::BurstClients(n, wants) => {
                for _ in 0..*n {
                    self.bursts += 1;
                    self.client(&format!("new-{}", self.bursts), DB, *wants, None)?;
                }
            }
            Op::BurstIds(n) => {
                let resource = (0..*n)
                    .map(|_| {
                        self.burst_ids += 1;
                        pb::ResourceRequest {
                            resource_id: format!("burst/{}", self.burst_ids),
                            priority: 0,
                            has: None,
                            wants: 10.0,
                            has_remaining_ms: None,
                        }
                    })
                    .collect();
                self.send_client(pb::GetCapacityRequest {
                    client_id: "burster".into(),
                    resource,
                })?;
            }
            Op::Grow(by) => self.reload(Some(self.last_db + by)),
            Op::Shrink(by) => self.reload(Some((self.last_db - by).max(1.0))),
            Op::Remove => self.reload(None),
            Op::Restore => self.reload(Some(self.last_db)),
            Op::MasterChange => {
                self.core = ServerCore::new(CoreOptions::default(), config(self.db));
                self.core.become_master(self.now);
                self.term += 1;
                self.master_since = self.now;
            }
            Op::Round => self.round()?,
        }
        Ok(())
    }

    /// Σ of unexpired grants on `resource`: the current master's only, or
    /// every requester's latest.
    pub(crate) fn sum(&self, resource: &str, current_term: bool) -> f64 {
        self.held
            .iter()
            .filter(|((_, r), h)| {
                r == resource && h.expiry > self.now && (!current_term || h.term == self.term)
            })
            .map(|(_, h)| h.capacity)
            .sum()
    }

    pub(crate) fn check(&self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        let mut resources: Vec<&str> = self.held.keys().map(|(_, r)| r.as_str()).collect();
        resources.sort_unstable();
        resources.dedup();
        for r in resources {
            let bound = self.bound(r) * (1.0 + 1e-9) + 1e-9;
            let current = self.sum(r, true);
            prop_assert!(
                current <= bound,
                "step {step} {op:?}: {r}: Σ of this master's grants {current} > {bound}"
            );
            if self.now >= self.tainted_until {
                let all = self.sum(r, false);
                prop_assert!(
                    all <= bound,
                    "step {step} {op:?}: {r}: Σ of all grants {all} > {bound}"
                );
            }
        }
        Ok(())
    }
}
