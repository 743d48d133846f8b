//! The callers' loops, as the client library's background task and the
//! server's upstream task run them: wake up when the core says something is
//! due (or when demand changed), send one bulk request through the link
//! (`link.rs`), and hand the answer, or the failure with the backoff's
//! delay, to the core. Nothing is sent while a call is outstanding.
//!
//! Must not: decide anything (the real cores do).

use doorman_core::client::GrantItem;
use doorman_core::convert;
use doorman_core::schedule::deadline_for;
use doorman_core::server::{CapacityRequest, Claim, ResourceAsk, Sharded, UpstreamGrant, Who};
use doorman_lease::{Demand, Span, Time};

use super::link::{Answer, Step};
use super::{
    amount, client_grant, upstream_grant, Answered, Caller, Ev, Link, Reply, Sim, RPC_TIMEOUT,
};

impl Sim {
    pub(super) fn link_mut(&mut self, caller: Caller) -> &mut Link {
        match caller {
            Caller::Client(c) => &mut self.clients[c].link,
            Caller::Node(n) => &mut self.nodes[n].link,
        }
    }

    pub(super) fn schedule_client(&mut self, c: usize) {
        let now = self.now();
        let cl = &mut self.clients[c];
        cl.wake_gen += 1;
        let gen = cl.wake_gen;
        if let Some(t) = cl.core.next_wakeup(now) {
            self.push(t, Ev::ClientWake(c, gen));
        }
    }

    /// The client's wants changed: its loop wakes at once (the library's
    /// `set_wants` does), or after the call it is in.
    pub(super) fn poke_client(&mut self, c: usize) {
        if !self.clients[c].link.busy() {
            let gen = self.clients[c].wake_gen;
            self.push(self.now(), Ev::ClientWake(c, gen));
        }
    }

    pub(super) fn schedule_upstream(&mut self, node: usize, at: Option<Time>) {
        let n = &mut self.nodes[node];
        n.wake_gen += 1;
        let gen = n.wake_gen;
        let at = at.or_else(|| n.core.next_upstream_wakeup());
        if let Some(t) = at {
            self.push(t, Ev::UpstreamWake(node, gen));
        }
    }

    /// A client's wake-up: refresh its wants, send what is due.
    pub(super) fn client_wake(&mut self, c: usize, gen: u64) {
        let now = self.now();
        let cl = &mut self.clients[c];
        if cl.wake_gen != gen || cl.link.busy() {
            return;
        }
        let res = &self.scenario.resource;
        cl.core.set_wants(res, cl.wants, now);
        if let Some(items) = self.client_asks(c, now).filter(|i| !i.is_empty()) {
            let cl = &mut self.clients[c];
            let ids: Vec<String> = items.iter().map(|i| i.resource_id.clone()).collect();
            let req = CapacityRequest {
                who: Who::Client(cl.id.clone()),
                resources: items.iter().map(|i| convert::ask(i, now)).collect(),
            };
            let deadline = deadline_for(items.iter().filter_map(|i| i.has.as_ref()), RPC_TIMEOUT);
            let step = cl.link.start(ids, req, (now, deadline));
            self.run_step(Caller::Client(c), step);
        }
        if !self.clients[c].link.busy() {
            if !self.clients[c].replay.holds_own() {
                self.schedule_client(c);
            }
            if self.clients[c].replay.waiting() {
                let gen = self.clients[c].wake_gen;
                self.push(now + super::replay::POLL, Ev::ClientWake(c, gen));
            }
        }
    }

    /// An intermediate node's upstream wake-up: ask the parent what is due.
    pub(super) fn upstream_wake(&mut self, node: usize, gen: u64) {
        let now = self.now();
        let n = &mut self.nodes[node];
        if n.wake_gen != gen || n.master.is_none() || n.parent.is_none() {
            return;
        }
        if n.link.busy() {
            n.poke = true;
            return;
        }
        if let Some(asks) = self.node_asks(node, now).filter(|a| !a.is_empty()) {
            let n = &mut self.nodes[node];
            let ids: Vec<String> = asks.iter().map(|a| a.resource_id.clone()).collect();
            let req = CapacityRequest {
                who: Who::Server(n.id.clone()),
                resources: asks
                    .iter()
                    .map(|a| ResourceAsk {
                        resource_id: a.resource_id.clone(),
                        demands: a
                            .bands
                            .iter()
                            .filter_map(|&(p, n, w)| Demand::new(p, n, w).ok())
                            .collect(),
                        claim: a.has.map(|l| Claim::held(&l, amount(l.capacity), now)),
                        outstanding: Some(amount(a.outstanding)),
                    })
                    .collect(),
            };
            let deadline = deadline_for(asks.iter().filter_map(|a| a.has.as_ref()), RPC_TIMEOUT);
            let step = n.link.start(ids, req, (now, deadline));
            self.run_step(Caller::Node(node), step);
        }
        if !self.nodes[node].link.busy() {
            if !self.nodes[node].replay.holds_own() {
                self.schedule_upstream(node, None);
            }
            if self.nodes[node].replay.waiting() {
                let gen = self.nodes[node].wake_gen;
                self.push(now + super::replay::POLL, Ev::UpstreamWake(node, gen));
            }
        }
    }

    /// An answer (or a failure) of one RPC reaches its caller.
    pub(super) fn reply(&mut self, caller: Caller, epoch: u64, task: usize, reply: Reply) {
        let link = self.link_mut(caller);
        if link.epoch() != epoch || !link.busy() {
            return; // the calling process is gone
        }
        let step = link.on_reply(task, reply);
        self.run_step(caller, step);
    }

    fn run_step(&mut self, caller: Caller, step: Step) {
        match step {
            Step::Send(task, msg) => self.send(caller, task, msg),
            Step::Done(ids, r) => self.finish(caller, ids, r),
        }
    }

    /// A call is over: the core gets the grants, or the failure and the
    /// backoff's delay; the loop goes on.
    fn finish(&mut self, caller: Caller, ids: Vec<String>, r: Result<Answer, ()>) {
        let now = self.now();
        let link = self.link_mut(caller);
        let answered = link
            .master()
            .filter(|_| r.is_ok())
            .map(|m| (m, link.epoch()));
        let enabled = self.scenario.lease_stream;
        self.stream_mut(caller).after_call(enabled, answered, now);
        match caller {
            Caller::Client(c) => {
                let cl = &mut self.clients[c];
                let r = r.map(|a| {
                    let items = a.grants.iter().map(|g| client_grant(g, a.sent_at));
                    items.collect::<Vec<GrantItem>>()
                });
                let ok = r.is_ok();
                match cl.backoff.outcome(r) {
                    Ok(g) => cl.core.on_response(now, &ids, &g),
                    Err((_, d)) => cl.core.on_failure(now, &ids, Span::from_duration(d)),
                }
                cl.replay.call_ended(ok);
                // Wants may have moved during the call: the loop looks at once.
                let gen = cl.wake_gen;
                self.client_wake(c, gen);
            }
            Caller::Node(node) => {
                let n = &mut self.nodes[node];
                let r = r.map(|a| {
                    let grants = a.grants.iter().map(|g| upstream_grant(g, (a.sent_at, now)));
                    grants.collect::<Vec<UpstreamGrant>>()
                });
                let answered = match n.backoff.outcome(r) {
                    Ok(g) => {
                        n.core.upstream_response(now, &ids, &g);
                        log_answers(self.answers.as_mut(), (now, self.start, node), &g);
                        true
                    }
                    Err((_, d)) => {
                        n.core.upstream_failure(now, &ids, Span::from_duration(d));
                        false
                    }
                };
                let poke = std::mem::take(&mut n.poke);
                n.replay.call_ended(answered);
                if answered {
                    self.upstream_answered(node);
                }
                self.moved(node);
                self.schedule_upstream(node, poke.then_some(now));
            }
        }
    }
}

/// Logs what node `node` got from its parent at `now` ([`Sim::answers`]).
fn log_answers(
    log: Option<&mut Vec<Answered>>,
    (now, start, node): (Time, Time, usize),
    g: &[UpstreamGrant],
) {
    let Some(log) = log else { return };
    for x in g {
        log.push(Answered {
            t: (now - start).as_secs_f64(),
            node,
            grant: (
                x.resource_id.clone(),
                x.lease.capacity,
                (x.lease.expiry - now).as_secs_f64(),
            ),
        });
    }
}

/// Counts of RPC outcomes over a run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RpcCounts {
    /// Discovery RPCs sent.
    pub discovery: u64,
    /// GetCapacity and GetServerCapacity RPCs sent.
    pub capacity: u64,
    /// RPCs that failed at their deadline (a node cut off).
    pub timed_out: u64,
    /// RPCs refused (a crashed task).
    pub refused: u64,
    /// Redirects answered by standbys.
    pub redirects: u64,
    /// New connections opened (one more round trip each).
    pub connects: u64,
    /// Grants pushed on lease streams.
    pub pushes: u64,
}
