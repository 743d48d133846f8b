//! The RPCs of the simulated world: clients asking their leaf, servers
//! answering, intermediate servers asking their parent, and the answers or
//! failures coming back, each after the delay the scenario draws. A request
//! to an unreachable node fails after the RPC timeout.
//!
//! Must not: decide anything (the real cores do).

use doorman_algorithms::{Demand, Time};
use doorman_core::client::GrantItem;
use doorman_core::server::{CapacityRequest, ResourceAsk, UpstreamGrant, Who};

use super::{amount, client_grant, upstream_grant, Ev, From, Sim, RPC_TIMEOUT};

impl Sim {
    pub(super) fn schedule_client(&mut self, c: usize) {
        let now = self.now;
        let cl = &mut self.clients[c];
        cl.wake_gen += 1;
        let gen = cl.wake_gen;
        if let Some(t) = cl.core.next_wakeup(now) {
            self.push(t.max(now), Ev::ClientWake(c, gen));
        }
    }

    pub(super) fn schedule_upstream(&mut self, node: usize, at: Option<Time>) {
        let n = &mut self.nodes[node];
        n.wake_gen += 1;
        let gen = n.wake_gen;
        let at = at.or_else(|| n.core.next_upstream_wakeup());
        if let Some(t) = at {
            let t = t.max(self.now);
            self.push(t, Ev::UpstreamWake(node, gen));
        }
    }

    /// A client's wake-up: refresh its wants, send what is due.
    pub(super) fn client_wake(&mut self, c: usize, gen: u64) {
        let now = self.now;
        if self.clients[c].wake_gen != gen {
            return;
        }
        let res = self.scenario.resource.clone();
        let cl = &mut self.clients[c];
        cl.core.set_wants(&res, cl.wants, now);
        if let Some(items) = cl.core.poll_request(now) {
            let ids: Vec<String> = items.iter().map(|i| i.resource_id.clone()).collect();
            let req = CapacityRequest {
                who: Who::Client(cl.id.clone()),
                resources: items
                    .iter()
                    .map(|i| ResourceAsk {
                        resource_id: i.resource_id.clone(),
                        demands: vec![Demand::client(i.priority, amount(i.wants))],
                        claimed_has: i.has.map(|l| amount(l.capacity)),
                        claimed_refresh: i.has.map(|l| l.refresh_interval),
                        outstanding: None,
                    })
                    .collect(),
            };
            let leaf = cl.leaf;
            let d = self.delay();
            if self.reachable(leaf) {
                self.push(now + d, Ev::Request(leaf, From::Client(c), req));
            } else {
                self.push(now + RPC_TIMEOUT, Ev::ClientResponse(c, ids, None));
            }
        }
        self.schedule_client(c);
    }

    /// A node answers a request (nothing when it is unreachable).
    pub(super) fn request(&mut self, node: usize, from: From, req: CapacityRequest) {
        let now = self.now;
        let result = if self.reachable(node) {
            self.nodes[node].core.get_capacity(now, &req).ok()
        } else {
            None
        };
        if self.nodes[node].core.take_upstream_wake() {
            self.schedule_upstream(node, Some(now));
        }
        let d = self.delay();
        let ids: Vec<String> = req
            .resources
            .iter()
            .map(|r| r.resource_id.clone())
            .collect();
        match from {
            From::Client(c) => {
                let grants = result.map(|g| g.iter().map(client_grant).collect());
                self.push(now + d, Ev::ClientResponse(c, ids, grants));
            }
            From::Node(child) => {
                let grants = result.map(|g| g.iter().map(upstream_grant).collect());
                self.push(now + d, Ev::UpstreamResponse(child, ids, grants));
            }
        }
    }

    /// An answer (or a failure) reaches a client.
    pub(super) fn client_response(
        &mut self,
        c: usize,
        ids: Vec<String>,
        grants: Option<Vec<GrantItem>>,
    ) {
        let now = self.now;
        let cl = &mut self.clients[c];
        match cl.backoff.outcome(grants.ok_or(())) {
            Ok(g) => cl.core.on_response(now, &ids, &g),
            Err((_, d)) => cl.core.on_failure(now, &ids, Time::from_duration(d)),
        }
        self.schedule_client(c);
    }

    /// An intermediate node's upstream wake-up: ask the parent what is due.
    pub(super) fn upstream_wake(&mut self, node: usize, gen: u64) {
        let now = self.now;
        if self.nodes[node].wake_gen != gen || !self.nodes[node].up {
            return;
        }
        let Some(parent) = self.nodes[node].parent else {
            return;
        };
        if let Some(asks) = self.nodes[node].core.upstream_request(now) {
            let ids: Vec<String> = asks.iter().map(|a| a.resource_id.clone()).collect();
            let req = CapacityRequest {
                who: Who::Server(self.nodes[node].id.clone()),
                resources: asks
                    .iter()
                    .map(|a| ResourceAsk {
                        resource_id: a.resource_id.clone(),
                        demands: a
                            .bands
                            .iter()
                            .filter_map(|&(p, n, w)| Demand::new(p, n, w).ok())
                            .collect(),
                        claimed_has: a.has.map(|l| amount(l.capacity)),
                        claimed_refresh: a.has.map(|l| l.refresh_interval),
                        outstanding: Some(amount(a.outstanding)),
                    })
                    .collect(),
            };
            let d = self.delay();
            if self.reachable(parent) {
                self.push(now + d, Ev::Request(parent, From::Node(node), req));
            } else {
                self.push(now + RPC_TIMEOUT, Ev::UpstreamResponse(node, ids, None));
            }
        }
        self.schedule_upstream(node, None);
    }

    /// The parent's answer (or a failure) reaches a node.
    pub(super) fn upstream_response(
        &mut self,
        node: usize,
        ids: Vec<String>,
        grants: Option<Vec<UpstreamGrant>>,
    ) {
        let now = self.now;
        let n = &mut self.nodes[node];
        match n.backoff.outcome(grants.ok_or(())) {
            Ok(g) => n.core.upstream_response(now, &ids, &g),
            Err((_, d)) => n.core.upstream_failure(now, &ids, Time::from_duration(d)),
        }
        self.schedule_upstream(node, None);
    }
}
